package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

func TestSchemaStatus(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		st     store.SchemaStatus
		behind bool
		want   string
	}{
		"Current": {
			st:   store.SchemaStatus{Version: 1, Latest: 1, Current: 14},
			want: "schema version 001 of 001, 14 functions current",
		},
		"NotMigrated": {
			st:     store.SchemaStatus{Latest: 1, Missing: []string{"001_tables"}, Stale: []string{"acquire (missing)"}},
			behind: true,
			want:   "schema not migrated (this library's version is 001), migrations to apply: 001_tables, 0 functions current, to install: acquire (missing)",
		},
		"Squashed": {
			st:     store.SchemaStatus{Latest: 1, Squashed: 10, Missing: []string{"001_tables"}},
			behind: true,
			want:   "schema version 010 of the numbering before v0.1.0 (this library's is 001), migrations to apply: 001_tables",
		},
		"FunctionChanged": {
			st:     store.SchemaStatus{Version: 1, Latest: 1, Current: 13, Stale: []string{"renew (changed)"}},
			behind: true,
			want:   "schema version 001 of 001, 13 functions current, to install: renew (changed)",
		},
		"NewerFunction": {
			st:   store.SchemaStatus{Version: 1, Latest: 1, Current: 13, Newer: []string{"renew"}},
			want: "schema version 001 of 001, 13 functions current, installed by a newer library (left alone): renew",
		},
		"NoFunctions": {
			st:   store.SchemaStatus{Version: 3, Latest: 3},
			want: "schema version 003 of 003",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.behind, tc.st.Behind())
			require.Equal(t, tc.want, tc.st.String())
		})
	}
}
