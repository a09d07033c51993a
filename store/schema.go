package store

import (
	"fmt"
	"strings"
)

// SchemaStatus is what a store's schema records next to what its Migrate
// would apply: the answer of `tenure migrate --check` and the version line
// of `tenure migrate`. Stores with a schema of migrations and functions
// (pgstore, mysqlstore) report it.
type SchemaStatus struct {
	// Version is the highest migration version the schema records (0: none,
	// not migrated); Latest is the store library's last.
	Version, Latest int
	// Missing names the migrations the schema does not record
	// ("001_tables").
	Missing []string
	// Squashed is the highest version of the migration numbering used
	// before v0.1.0 that the schema records, 0 when none: Migrate upgrades
	// such a schema in place.
	Squashed int
	// Stale names, with why, the functions or procedures Migrate would
	// install ("acquire (missing)", "renew (older)", "fence (changed)");
	// Newer those a newer library installed at a higher revision, which
	// Migrate leaves alone; Current counts those recorded as they are.
	Stale, Newer []string
	Current      int
}

// Behind reports whether Migrate would change the schema.
func (st SchemaStatus) Behind() bool {
	return len(st.Missing) > 0 || st.Squashed > 0 || len(st.Stale) > 0
}

// String is the status in one line: "schema version 001 of 001, 14
// functions current", or what is behind.
func (st SchemaStatus) String() string {
	var b strings.Builder
	switch {
	case st.Squashed > 0:
		fmt.Fprintf(&b, "schema version %03d of the numbering before v0.1.0 (this library's is %03d)", st.Squashed, st.Latest)
	case st.Version == 0:
		fmt.Fprintf(&b, "schema not migrated (this library's version is %03d)", st.Latest)
	default:
		fmt.Fprintf(&b, "schema version %03d of %03d", st.Version, st.Latest)
	}
	if len(st.Missing) > 0 {
		fmt.Fprintf(&b, ", migrations to apply: %s", strings.Join(st.Missing, ", "))
	}
	if st.Current+len(st.Stale)+len(st.Newer) > 0 {
		fmt.Fprintf(&b, ", %d functions current", st.Current)
	}
	if len(st.Stale) > 0 {
		fmt.Fprintf(&b, ", to install: %s", strings.Join(st.Stale, ", "))
	}
	if len(st.Newer) > 0 {
		fmt.Fprintf(&b, ", installed by a newer library (left alone): %s", strings.Join(st.Newer, ", "))
	}
	return b.String()
}
