package mysqlstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"strings"
)

// legacyFS holds the migrations 001 to 003 of the numbering before
// v0.1.0, as they were when they were squashed: what databases migrated by
// a tenure of then hold.
//
//go:embed testdata/legacy/*.up.sql
var legacyFS embed.FS

// LegacyVersions is how many migrations the numbering before v0.1.0 had.
func LegacyVersions() int { return len(squashed) }

// LegacyMigrateTo applies the migrations of the numbering before v0.1.0 up
// to version only, as a tenure of then did.
func LegacyMigrateTo(ctx context.Context, s *Store, version int) error {
	entries, err := fs.ReadDir(legacyFS, "testdata/legacy")
	if err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }() // Nothing is left to do about a failed close.
	if _, err := conn.ExecContext(ctx, s.obj.createMigrationsTable()); err != nil {
		return err
	}
	// The names of then that this numbering's renderer no longer knows.
	o := s.obj
	legacy := strings.NewReplacer(
		"{{acquire}}", o.Ident(o.TablePrefix+"acquire"),
		"{{get}}", o.Ident(o.TablePrefix+"get"),
		"{{list}}", o.Ident(o.TablePrefix+"list"),
		"{{add_payload_lit}}", quoteLiteral("ALTER TABLE "+o.Ident(o.Leases)+" ADD COLUMN payload VARBINARY(1024) NOT NULL DEFAULT ''"),
	)
	for i, e := range entries[:version] {
		text, err := fs.ReadFile(legacyFS, "testdata/legacy/"+e.Name())
		if err != nil {
			return err
		}
		for _, stmt := range statements(o.render(legacy.Replace(string(text)))) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", e.Name(), err)
			}
		}
		// The name a tenure of then recorded, from the file's, so that a
		// squashed list that drifts from the files fails the upgrade tests.
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			return fmt.Errorf("%s is not named NNN_name.up.sql", e.Name())
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO "+o.Ident(o.Migrations)+" (version, name) VALUES (?, ?)", i+1, m[2]); err != nil {
			return err
		}
	}
	return nil
}

// BellName is the user-level lock that wakes the followers of lease name.
func BellName(s *Store, name string) string { return s.bells.bellName(name) }

// WithoutBells turns s's wake-ups off, as before they existed; call it
// before s is used.
func WithoutBells(s *Store) { s.bells.enabled = false }

// BellConns is the most connections s's bells take (0: none, wake-ups are
// off): the holder's and the waiting ones.
func BellConns(s *Store) int {
	if !s.bells.enabled {
		return 0
	}
	return cap(s.bells.waits) + 1
}
