package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestInterpretError(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err  error
		want error // nil: matches none of the sentinels below
	}{
		"UndefinedTable":    {err: &pgconn.PgError{Code: "42P01"}, want: store.ErrNotMigrated},
		"UndefinedFunction": {err: &pgconn.PgError{Code: "42883"}, want: store.ErrNotMigrated},
		"UndefinedColumn":   {err: &pgconn.PgError{Code: "42703"}, want: store.ErrNotMigrated},
		"NoSchema":          {err: &pgconn.PgError{Code: "3F000"}, want: store.ErrNotMigrated},
		"AdminShutdown":     {err: &pgconn.PgError{Code: "57P01"}, want: store.ErrUnavailable},
		"QueryCanceled":     {err: &pgconn.PgError{Code: "57014"}, want: store.ErrUnavailable},
		"ConnectionFailure": {err: &pgconn.PgError{Code: "08006"}, want: store.ErrUnavailable},
		"Deadlock":          {err: &pgconn.PgError{Code: "40P01"}, want: store.ErrUnavailable},
		"TooManyConns":      {err: &pgconn.PgError{Code: "53300"}, want: store.ErrUnavailable},
		"ReadOnlyStandby":   {err: &pgconn.PgError{Code: "25006"}, want: store.ErrUnavailable},
		"LockTimeout":       {err: &pgconn.PgError{Code: "55P03"}, want: store.ErrUnavailable},
		"Deadline":          {err: fmt.Errorf("read: %w", context.DeadlineExceeded), want: store.ErrUnavailable},
		"Transport":         {err: io.ErrUnexpectedEOF, want: store.ErrUnavailable},
		"PermissionDenied":  {err: &pgconn.PgError{Code: "42501"}},
		"StaleCachedPlan":   {err: &pgconn.PgError{Code: "0A000", Message: "cached plan must not change result type"}, want: store.ErrUnavailable},
		"NotSupported":      {err: &pgconn.PgError{Code: "0A000", Message: "something else"}},
		"CheckViolation":    {err: &pgconn.PgError{Code: "23514"}},
		"OddCode":           {err: &pgconn.PgError{Code: "X"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := interpretError("test op", tc.err)
			require.ErrorIs(t, got, tc.err, "the cause stays in the chain")
			require.Contains(t, got.Error(), "pgstore: test op")
			for _, sentinel := range []error{store.ErrNotMigrated, store.ErrUnavailable} {
				require.Equal(t, sentinel == tc.want, errors.Is(got, sentinel), "matches %v", sentinel)
			}
		})
	}
	require.NoError(t, interpretError("nothing", nil))
}
