package pgkit

import (
	"context"
	"fmt"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
)

// Status reads what the schema records of s, on q (a pool, a connection or
// a transaction), and changes nothing. It takes no lock: a migration
// running meanwhile may have moved on by the time it returns. Its errors
// are [Set.Errors]'s.
func (s Set) Status(ctx context.Context, q interface {
	queryer
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (store.SchemaStatus, error) {
	st := store.SchemaStatus{}
	if n := len(s.Migrations); n > 0 {
		st.Latest = s.Migrations[n-1].Version
	}
	exists := func(table string) (bool, error) {
		var ok bool
		err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok)
		return ok, err
	}
	applied := map[int]string{}
	ok, err := exists(s.Table)
	if err == nil && ok {
		applied, err = s.applied(ctx, q)
	}
	if err != nil {
		return store.SchemaStatus{}, s.Errors.Error("migration status", err)
	}
	if st.Squashed = s.squashed(applied); st.Squashed > 0 {
		applied = map[int]string{}
	}
	for _, m := range s.Migrations {
		if _, ok := applied[m.Version]; ok {
			st.Version = max(st.Version, m.Version)
		} else {
			st.Missing = append(st.Missing, fmt.Sprintf("%03d_%s", m.Version, m.Name))
		}
	}
	if len(s.Functions) == 0 {
		return st, nil
	}
	recs := map[string]storekit.Recorded{}
	ok, err = exists(s.FunctionsTable)
	if err == nil && ok {
		recs, err = s.recordedFunctions(ctx, q)
	}
	if err != nil {
		return store.SchemaStatus{}, s.Errors.Error("migration status", err)
	}
	for _, f := range s.Functions {
		rec, ok := recs[f.Name]
		switch why := storekit.FunctionState(f, rec, ok); why {
		case "":
			st.Current++
		case "newer":
			st.Newer = append(st.Newer, f.Name)
		default:
			st.Stale = append(st.Stale, f.Name+" ("+why+")")
		}
	}
	return st, nil
}
