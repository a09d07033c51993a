package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestImageRunsTenure builds tenure for this machine, writes the image
// twice, checks the two layouts are the same bytes, then unpacks the
// layers of this platform's image into a directory and runs the binary
// from there, and checks the image runs as a non-root user and holds no
// shell.
func TestImageRunsTenure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "tenure")
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", bin, "./cmd/tenure")
	build.Dir = "../.."
	// GOWORK empty: the repository's go.work, which the command's module
	// needs, whatever this test runs under.
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build tenure: %v\n%s", err, out)
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	epoch := time.Unix(1765140000, 0).UTC()
	out := filepath.Join(dir, "oci")
	if err := write(out, "v0.0.0", epoch, binaries{platform: bin}); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(dir, "oci-again")
	if err := write(again, "v0.0.0", epoch, binaries{platform: bin}); err != nil {
		t.Fatal(err)
	}
	if a, b := readIndex(t, out), readIndex(t, again); !bytes.Equal(a, b) {
		t.Fatalf("two writes of one image differ:\n%s\n%s", a, b)
	}

	idx, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Platform == nil || m.Manifests[0].Platform.OS+"/"+m.Manifests[0].Platform.Architecture != platform {
		t.Fatalf("index manifests %+v, want one for %s", m.Manifests, platform)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if u := cfg.Config.User; u == "" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root") {
		t.Fatalf("the image runs as user %q, want a non-root one", u)
	}
	if cfg.Config.User != "65532:65532" {
		t.Fatalf("the image runs as %q, want 65532:65532", cfg.Config.User)
	}

	root := filepath.Join(dir, "rootfs")
	unpack(t, img, root)
	for _, sh := range []string{"bin/sh", "bin/bash", "usr/bin/sh"} {
		if _, err := os.Lstat(filepath.Join(root, sh)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the image holds %s (%v); it should hold no shell", sh, err)
		}
	}
	got, err := exec.CommandContext(t.Context(), filepath.Join(root, cfg.Config.Entrypoint[0]), "version").Output()
	if err != nil {
		t.Fatalf("tenure version from the image's layers: %v", err)
	}
	if !strings.HasPrefix(string(got), "tenure ") {
		t.Fatalf("tenure version from the image's layers printed %q", got)
	}
}

// readIndex returns the layout's index.json.
func readIndex(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// unpack writes the files of img's layers, in order, under root.
func unpack(t *testing.T, img v1.Image, root string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(root, filepath.Clean("/"+h.Name))
			switch h.Typeflag {
			case tar.TypeDir:
				err = os.MkdirAll(path, 0o755)
			case tar.TypeReg:
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(path, b, os.FileMode(h.Mode).Perm())
				}
			default:
				t.Fatalf("layer entry %s has type %c; the image holds directories and regular files only", h.Name, h.Typeflag)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
