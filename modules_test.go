package tenure_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// heavyModules are the module path prefixes a program that uses one store
// must not find in its module graph: the clients of the other backends,
// and what they bring (gRPC, Prometheus).
var heavyModules = []string{
	"k8s.io/", "sigs.k8s.io/", "github.com/aws/", "github.com/hashicorp/", "go.etcd.io/",
	"github.com/nats-io/", "github.com/prometheus/", "google.golang.org/grpc",
}

// TestPostgresProgramModuleGraph builds, as a user would, a program that
// imports tenure and store/pgstore in a module of its own, and checks its
// module graph (go list -m all) holds none of the other backends' clients:
// the promise of the nested modules. The program's go.mod takes this
// repository's modules from this tree, as a published version would be
// taken from the module proxy.
func TestPostgresProgramModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program against the module proxy's cache")
	}
	t.Parallel()
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	dir := t.TempDir()

	var gomod strings.Builder
	gomod.WriteString("module example.com/billing\n\ngo 1.26.0\n\nreplace (\n")
	for _, mod := range workspaceModules(t) {
		path := "github.com/tenure-dev/tenure"
		if mod != "." {
			path += "/" + mod
		}
		fmt.Fprintf(&gomod, "\t%s => %s\n", path, filepath.Join(root, mod))
	}
	gomod.WriteString(")\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod.String()), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(billingProgram), 0o644))

	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	goCmd("mod", "tidy")
	graph := goCmd("list", "-m", "all")
	require.Contains(t, graph, "github.com/jackc/pgx/v5", "the program's graph does not hold pgx: it was not built against store/pgstore")
	for _, line := range strings.Split(strings.TrimSpace(graph), "\n") {
		for _, heavy := range heavyModules {
			require.False(t, strings.HasPrefix(line, heavy),
				"a program importing tenure and store/pgstore has %q in its module graph: a module of this repository requires it outside its own backend", line)
		}
	}
	goCmd("build", "-o", filepath.Join(dir, "billing"), ".")
	require.FileExists(t, filepath.Join(dir, "billing"))
}

// workspaceModules returns the directories go.work uses, relative to the
// repository's root.
func workspaceModules(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("go.work")
	require.NoError(t, err)
	defer f.Close()
	var mods []string
	inUse := false
	for s := bufio.NewScanner(f); s.Scan(); {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "use (":
			inUse = true
		case inUse && line == ")":
			inUse = false
		case inUse && line != "":
			mods = append(mods, filepath.Clean(line))
		}
	}
	require.Contains(t, mods, ".", "go.work uses no root module")
	return mods
}

// billingProgram is the user's program: a nightly job on PostgreSQL.
const billingProgram = `package main

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/pgstore"
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	client, err := tenure.New(store, tenure.Config{Label: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	err = client.Do(ctx, "nightly-billing", func(ctx context.Context, lease *tenure.Lease) error {
		log.Printf("billing under token %d", lease.Token())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
`
