package pgstore

import (
	"context"
	"embed"

	"github.com/tenure-dev/tenure/internal/pgkit"
)

// SetListenHook makes s call hook with the backend pid of every listening
// connection once its LISTEN succeeded.
func SetListenHook(s *Store, hook func(pid uint32)) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	s.listenHook = hook
}

// legacyFS holds the migrations 001 to 010 of the numbering before
// v0.1.0, as they were when they were squashed: what schemas migrated by
// a tenure of then hold.
//
//go:embed testdata/legacy/*.up.sql
var legacyFS embed.FS

// LegacyMigrateTo applies the migrations of the numbering before v0.1.0 up
// to version only, as a tenure of then did.
func LegacyMigrateTo(ctx context.Context, s *Store, version int) error {
	set, err := legacySet(s.obj)
	if err != nil {
		return err
	}
	set.Migrations = set.Migrations[:version]
	return set.Run(ctx, s.pool)
}

// LegacyVersions is how many migrations the numbering before v0.1.0 had.
func LegacyVersions() int { return len(squashed) }

// legacySet is the store's set of migrations before v0.1.0: no functions
// of their own, and the names of 003's get and list, which 006 replaced.
func legacySet(obj Objects) (pgkit.Set, error) {
	render := obj.renderer()
	ns := obj.namespace()
	legacy := ns.Renderer(map[string]string{"get_fn": ns.Name("get"), "list_fn": ns.Name("list")})
	return pgkit.LoadSet(pgkit.Set{
		Errors:    errs,
		Namespace: ns,
		Title:     "tenure schema before v0.1.0",
		Table:     ns.Ident(obj.Migrations),
		Render:    func(sql string) string { return render(legacy(sql)) },
	}, legacyFS, "testdata/legacy")
}

// Versions lists the versions of every embedded migration, in order.
func Versions() []int {
	set, err := migrations(Objects{})
	if err != nil {
		panic(err)
	}
	vs := make([]int, len(set.Migrations))
	for i, m := range set.Migrations {
		vs[i] = m.Version
	}
	return vs
}
