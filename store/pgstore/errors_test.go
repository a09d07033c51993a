package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
)

func TestInterpretError(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err  error
		want error // nil: matches none of the sentinels below
	}{
		"UndefinedTable":    {err: &pgconn.PgError{Code: "42P01"}, want: tenure.ErrNotMigrated},
		"UndefinedFunction": {err: &pgconn.PgError{Code: "42883"}, want: tenure.ErrNotMigrated},
		"UndefinedColumn":   {err: &pgconn.PgError{Code: "42703"}, want: tenure.ErrNotMigrated},
		"NoSchema":          {err: &pgconn.PgError{Code: "3F000"}, want: tenure.ErrNotMigrated},
		"AdminShutdown":     {err: &pgconn.PgError{Code: "57P01"}, want: tenure.ErrUnavailable},
		"QueryCanceled":     {err: &pgconn.PgError{Code: "57014"}, want: tenure.ErrUnavailable},
		"ConnectionFailure": {err: &pgconn.PgError{Code: "08006"}, want: tenure.ErrUnavailable},
		"Deadlock":          {err: &pgconn.PgError{Code: "40P01"}, want: tenure.ErrUnavailable},
		"TooManyConns":      {err: &pgconn.PgError{Code: "53300"}, want: tenure.ErrUnavailable},
		"ReadOnlyStandby":   {err: &pgconn.PgError{Code: "25006"}, want: tenure.ErrUnavailable},
		"LockTimeout":       {err: &pgconn.PgError{Code: "55P03"}, want: tenure.ErrUnavailable},
		"Deadline":          {err: fmt.Errorf("read: %w", context.DeadlineExceeded), want: tenure.ErrUnavailable},
		"Transport":         {err: io.ErrUnexpectedEOF, want: tenure.ErrUnavailable},
		"PermissionDenied":  {err: &pgconn.PgError{Code: "42501"}},
		"StaleCachedPlan":   {err: &pgconn.PgError{Code: "0A000", Message: "cached plan must not change result type"}, want: tenure.ErrUnavailable},
		"NotSupported":      {err: &pgconn.PgError{Code: "0A000", Message: "something else"}},
		"CheckViolation":    {err: &pgconn.PgError{Code: "23514"}},
		"OddCode":           {err: &pgconn.PgError{Code: "X"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := interpretError("test op", tc.err)
			require.ErrorIs(t, got, tc.err, "the cause stays in the chain")
			require.Contains(t, got.Error(), "pgstore: test op")
			for _, sentinel := range []error{tenure.ErrNotMigrated, tenure.ErrUnavailable} {
				require.Equal(t, sentinel == tc.want, errors.Is(got, sentinel), "matches %v", sentinel)
			}
		})
	}
	require.NoError(t, interpretError("nothing", nil))
}
