package storeurl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// SQLite is a sqlite:PATH URL, or no URL at all: store/sqlitestore, a file
// on this host.
type SQLite struct {
	// Path is the file, as given (a leading ~/ expanded).
	Path string
}

// defaultSQLite is the target of no URL at all: the SQLite file at
// [sqlitestore.DefaultPath].
func defaultSQLite() (Target, error) {
	path, err := sqlitestore.DefaultPath()
	if err != nil {
		return Target{}, Errorf(store.ErrInvalid, err, "storeurl: no store URL given and no default SQLite file: %v; pass --store or set %s", err, EnvVar)
	}
	return Target{Backend: &SQLite{Path: path}, Display: "sqlite:" + path, Default: true}, nil
}

func (s *SQLite) file() string { return s.Path }

// Name is "SQLite".
func (*SQLite) Name() string { return "SQLite" }

// Form is how an SQLite URL is written.
func (*SQLite) Form() string { return "sqlite:PATH" }

// Traits of SQLite: renewals set the expiry from the host's now, and the
// store migrates itself.
func (*SQLite) Traits() Traits {
	return Traits{RenewKeepsExpiry: true,
		Schema: fmt.Sprintf("schema version %d (the SQLite store migrates itself when opened)", sqlitestore.SchemaVersion)}
}

func parseSQLite(raw string) (Target, error) {
	_, rest, _ := strings.Cut(raw, ":")
	path := rest
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		if !strings.HasPrefix(after, "/") {
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q names a host; an SQLite store is a local file: use sqlite:PATH or sqlite:///ABSOLUTE/PATH", raw)
		}
		path = after
	}
	if path == "" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q has no file path; use sqlite:PATH, e.g. sqlite:/var/lib/myjob/tenure.db", raw)
	}
	if after, ok := strings.CutPrefix(path, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return Target{}, Errorf(store.ErrInvalid, err, "storeurl: store URL %q starts with ~/ but the home directory is unknown: %v; use an absolute path", raw, err)
		}
		path = filepath.Join(home, after)
	}
	return Target{Backend: &SQLite{Path: path}, Display: "sqlite:" + path}, nil
}

// Open opens the file, creating and migrating it when needed.
func (s *SQLite) Open(ctx context.Context, t Target, _ OpenOptions) (Conn, error) {
	st, err := sqlitestore.Open(ctx, s.Path, sqlitestore.Config{})
	if err != nil {
		kind := store.ErrUnavailable
		if errors.Is(err, store.ErrInvalid) {
			kind = store.ErrInvalid
		}
		return nil, Errorf(kind, err, "storeurl: cannot open the SQLite store %s: %v", t.Display, err)
	}
	return sqliteConn{baseConn{t: t, st: st}}, nil
}

// MigrationSQL is the schema [sqlitestore.Open] creates itself.
func (*SQLite) MigrationSQL(Target) (string, error) {
	s, err := sqlitestore.SchemaSQL()
	if err != nil {
		return "", Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return s, nil
}

// GrantSQL refuses: a file has no roles.
func (s *SQLite) GrantSQL(Target, string) (string, error) {
	return "", Errorf(store.ErrInvalid, nil, "storeurl: an SQLite store has no roles to grant; it needs a file and directory this user can write (%s)", s.Path)
}

// ReadGrantSQL refuses as GrantSQL does.
func (s *SQLite) ReadGrantSQL(t Target, role string) (string, error) { return s.GrantSQL(t, role) }

type sqliteConn struct{ baseConn }

// CheckSchema opens nothing (opening creates and upgrades the file): the
// store keeps its schema up to date itself.
func (*SQLite) CheckSchema(_ context.Context, t Target, _ OpenOptions) ([]string, bool, error) {
	return []string{fmt.Sprintf("the SQLite store %s creates and upgrades its schema (version %d) itself when it is opened: nothing to check",
		t.Display, sqlitestore.SchemaVersion)}, false, nil
}

// Migrate says the store migrated itself when opened.
func (c sqliteConn) Migrate(context.Context) (string, error) {
	return fmt.Sprintf("the SQLite store %s is at schema version %d (it creates and upgrades its schema itself when opened)",
		c.t.Display, sqlitestore.SchemaVersion), nil
}

// WallClock is this host's clock.
func (sqliteConn) WallClock(context.Context) (*WallClock, error) {
	return &WallClock{Local: true, read: func(context.Context) (time.Time, error) { return time.Now(), nil }, close: func() error { return nil }}, nil
}

var (
	_ Backend = (*SQLite)(nil)
)
