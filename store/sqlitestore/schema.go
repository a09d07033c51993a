package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"path"
)

// migrations holds the schema steps, applied in order; the file numbered n
// brings the database to PRAGMA user_version n.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationFiles lists the steps by version; index 0 is version 1.
var migrationFiles = []string{
	"001_init.sql",
}

// SchemaVersion is the PRAGMA user_version of a database this package has
// migrated.
const SchemaVersion = 1

// migrate brings the schema to [SchemaVersion] in one IMMEDIATE transaction:
// processes that open a fresh file at once queue on the write lock, and each
// one after the first finds the work done.
func (s *Store) migrate(ctx context.Context) error {
	return s.writeTx(ctx, "migrate", func(tx *sql.Tx, _ int64) error {
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
