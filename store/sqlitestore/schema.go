package sqlitestore

import (
	"context"
	"embed"
	"fmt"
	"path"
	"strings"
)

// migrations holds the schema steps, applied in order; the file numbered n
// brings the database to PRAGMA user_version n.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationFiles lists the steps by version; index 0 is version 1.
var migrationFiles = []string{
	"001_init.sql",
	"002_changes.sql",
	"003_history.sql",
	"004_payload.sql",
	"005_line.sql",
	"006_windows.sql",
}

// SchemaVersion is the PRAGMA user_version of a database this package has
// migrated.
const SchemaVersion = 6

// migrate brings the schema to [SchemaVersion] in one IMMEDIATE transaction:
// processes that open a fresh file at once queue on the write lock, and each
// one after the first finds the work done.
func (s *Store) migrate(ctx context.Context) error {
	return s.writeTx(ctx, "migrate", func(w *write) error {
		tx := w.tx
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return err
		}
		if v > SchemaVersion || v < 0 {
			return fmt.Errorf("database %q has schema version %d (PRAGMA user_version) but this library knows versions up to %d: it was written by a newer tenure or belongs to another program; upgrade tenure or choose another path",
				s.path, v, SchemaVersion)
		}
		for next := v + 1; next <= SchemaVersion; next++ {
			name := migrationFiles[next-1]
			text, err := migrations.ReadFile(path.Join("migrations", name))
			if err != nil {
				return fmt.Errorf("read migration %s: %w", name, err)
			}
			if _, err := tx.ExecContext(ctx, string(text)); err != nil {
				return fmt.Errorf("apply migration %s: %w", name, err)
			}
		}
		if v == SchemaVersion {
			return nil
		}
		// PRAGMA takes no bind parameters; the version is a constant.
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion))
		return err
	})
}

// SchemaSQL returns the whole schema of [SchemaVersion] as one SQL script,
// for people to read (`tenure migrate --print`) or to apply with the sqlite3
// shell. [Open] needs none of it: it creates and upgrades the schema of the
// file it opens. The script switches the file to WAL, creates what is
// missing in one IMMEDIATE transaction and sets PRAGMA user_version, so a
// file it made is one Open accepts as it is. Apply it to a new file only:
// Open is what upgrades an existing one.
func SchemaSQL() (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "-- tenure SQLite schema, version %d (PRAGMA user_version).\n", SchemaVersion)
	b.WriteString("-- sqlitestore.Open creates it itself; this script is for review or for the sqlite3 shell.\n")
	b.WriteString("PRAGMA journal_mode = WAL;\n")
	b.WriteString("BEGIN IMMEDIATE;\n")
	for i, name := range migrationFiles {
		text, err := migrations.ReadFile(path.Join("migrations", name))
		if err != nil {
			return "", fmt.Errorf("sqlitestore: embedded migration %s is missing: %w", name, err)
		}
		fmt.Fprintf(&b, "\n-- Migration %s (user_version %d)\n", name, i+1)
		b.WriteString(strings.TrimRight(string(text), "\n"))
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nPRAGMA user_version = %d;\n", SchemaVersion)
	b.WriteString("COMMIT;\n")
	return b.String(), nil
}
