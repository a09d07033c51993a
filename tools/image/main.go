// Command image writes tenure's container image, without a Docker daemon:
// an OCI image layout holding an index with one image per platform, each
// one layer on an empty base (scratch) with the static tenure binary,
// /etc/passwd and /etc/group naming the non-root user nonroot
// (65532:65532) the image runs as, and /tmp. No shell, no package
// manager, no CA bundle (mount one and point SSL_CERT_FILE at it when a
// store needs the public roots). scripts/release runs it:
//
//	go run . -version v0.1.0 -epoch 1765140000 \
//	    -binary linux/amd64=dist/tenure-v0.1.0-linux-amd64 \
//	    -binary linux/arm64=dist/tenure-v0.1.0-linux-arm64 \
//	    -out dist/tenure-v0.1.0-oci
//
// The same binaries and epoch give the same bytes: every time in the
// image is the epoch (scripts/release passes the commit's time).
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the image runs as: distroless's nonroot.
const (
	uid  = 65532
	user = "nonroot"
)

// binaryPath is where the image keeps tenure.
const binaryPath = "/usr/local/bin/tenure"

type binaries map[string]string // platform (os/arch) → path

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binaries) Set(s string) error {
	pl, path, ok := strings.Cut(s, "=")
	if !ok || !strings.Contains(pl, "/") || path == "" {
		return fmt.Errorf("%q is not OS/ARCH=PATH (linux/amd64=dist/tenure-v0.1.0-linux-amd64, say)", s)
	}
	b[pl] = path
	return nil
}

func main() {
	bins := binaries{}
	version := flag.String("version", "", "the version the image is of (v0.1.0); its org.opencontainers.image.version label")
	epoch := flag.Int64("epoch", 0, "every time in the image, as Unix seconds (the commit's time)")
	out := flag.String("out", "", "the directory to write the OCI image layout to; it must not exist")
	flag.Var(bins, "binary", "OS/ARCH=PATH of a static tenure binary for that platform; repeat for each platform")
	flag.Parse()
	if *version == "" || *out == "" || len(bins) == 0 || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "image: usage: image -version VERSION -epoch UNIX -binary OS/ARCH=PATH... -out DIR")
		os.Exit(64)
	}
	if err := write(*out, *version, time.Unix(*epoch, 0).UTC(), bins); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

// write writes the layout of an index over one image per binary.
func write(out, version string, epoch time.Time, bins binaries) error {
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists; remove it first: a layout is written whole", out)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, pl := range sortedKeys(bins) {
		img, err := image(bins[pl], pl, version, epoch)
		if err != nil {
			return err
		}
		goos, arch, _ := strings.Cut(pl, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: arch}},
		})
	}
	if _, err := layout.Write(out, idx); err != nil {
		return fmt.Errorf("write the layout to %s: %w", out, err)
	}
	return nil
}

// image is the image of one platform: one layer on scratch.
func image(binary, platform, version string, epoch time.Time) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("read the %s binary: %w; build it first (scripts/release does)", platform, err)
	}
	rootfs, err := layerTar(bin, epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", platform, err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "tools/image"}})
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", platform, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	goos, arch, _ := strings.Cut(platform, "/")
	cfg.OS, cfg.Architecture = goos, arch
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{binaryPath},
		Cmd:        []string{"help"},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin"},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "tenure",
			"org.opencontainers.image.version": version,
			"org.opencontainers.image.source":  "https://github.com/tenure-dev/tenure",
		},
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("config of %s: %w", platform, err)
	}
	return mutate.CreatedAt(img, v1.Time{Time: epoch})
}

// layerTar is the image's one layer: the directories, the user, /tmp
// and the binary, owned by root (the binary cannot be rewritten by the
// user it runs as), every time the epoch.
func layerTar(bin []byte, epoch time.Time) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", user, uid, uid, user, user)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", user, uid)
	entries := []struct {
		name string
		mode int64
		uid  int
		body []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/" + user + "/", mode: 0o700, uid: uid, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(binaryPath, "/"), mode: 0o755, body: bin},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: epoch, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sortedKeys(m binaries) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
