package pgkit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/pgkit"
	"github.com/tenure-dev/tenure/store"
)

var testErrs = pgkit.Interpreter{
	Owner:   "owner",
	Migrate: "run the migration",
	Grant:   "grant it",
	Unknown: "it may have been applied",
}

func TestInterpreterError(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err      error
		want     error  // nil: matches none of the sentinels below
		contains string // in the message besides "owner: test op"
	}{
		"UndefinedTable":    {err: &pgconn.PgError{Code: "42P01"}, want: store.ErrNotMigrated, contains: "run the migration"},
		"UndefinedFunction": {err: &pgconn.PgError{Code: "42883"}, want: store.ErrNotMigrated},
		"UndefinedColumn":   {err: &pgconn.PgError{Code: "42703"}, want: store.ErrNotMigrated},
		"NoSchema":          {err: &pgconn.PgError{Code: "3F000"}, want: store.ErrNotMigrated},
		"AdminShutdown":     {err: &pgconn.PgError{Code: "57P01"}, want: store.ErrUnavailable, contains: "(it may have been applied)"},
		"QueryCanceled":     {err: &pgconn.PgError{Code: "57014"}, want: store.ErrUnavailable},
		"ConnectionFailure": {err: &pgconn.PgError{Code: "08006"}, want: store.ErrUnavailable},
		"Deadlock":          {err: &pgconn.PgError{Code: "40P01"}, want: store.ErrUnavailable},
		"TooManyConns":      {err: &pgconn.PgError{Code: "53300"}, want: store.ErrUnavailable},
		"ReadOnlyStandby":   {err: &pgconn.PgError{Code: "25006"}, want: store.ErrUnavailable},
		"LockTimeout":       {err: &pgconn.PgError{Code: "55P03"}, want: store.ErrUnavailable},
		"Deadline":          {err: fmt.Errorf("read: %w", context.DeadlineExceeded), want: store.ErrUnavailable},
		"Transport":         {err: io.ErrUnexpectedEOF, want: store.ErrUnavailable, contains: "(it may have been applied)"},
		"PermissionDenied":  {err: &pgconn.PgError{Code: "42501"}, contains: "permission denied; grant it"},
		"StaleCachedPlan":   {err: &pgconn.PgError{Code: "0A000", Message: "cached plan must not change result type"}, want: store.ErrUnavailable, contains: "retry"},
		"NotSupported":      {err: &pgconn.PgError{Code: "0A000", Message: "something else"}},
		"CheckViolation":    {err: &pgconn.PgError{Code: "23514"}},
		"OddCode":           {err: &pgconn.PgError{Code: "X"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := testErrs.Error("test op", tc.err)
			require.ErrorIs(t, got, tc.err, "the cause stays in the chain")
			require.Contains(t, got.Error(), "owner: test op")
			require.Contains(t, got.Error(), tc.contains)
			for _, sentinel := range []error{store.ErrNotMigrated, store.ErrUnavailable} {
				require.Equal(t, sentinel == tc.want, errors.Is(got, sentinel), "matches %v", sentinel)
			}
		})
	}
	require.NoError(t, testErrs.Error("nothing", nil))
}

func TestInterpreterWithoutSchema(t *testing.T) {
	t.Parallel()
	in := pgkit.Interpreter{Owner: "owner"}
	got := in.Error("lock", &pgconn.PgError{Code: "42883"})
	require.NotErrorIs(t, got, store.ErrNotMigrated, "a package without objects of its own is never unmigrated")
	require.Equal(t, "owner: lock: :  (SQLSTATE 42883)", got.Error())
	got = in.Error("lock", io.EOF)
	require.ErrorIs(t, got, store.ErrUnavailable)
	require.Equal(t, "owner: lock: tenure: store unavailable: EOF", got.Error())
}

// TestConnectionNeverMade: a call whose connection could not be made says
// that nothing was applied, not that it may have been.
func TestConnectionNeverMade(t *testing.T) {
	t.Parallel()
	_, err := pgconn.Connect(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=5")
	require.Error(t, err, "nothing listens on port 1")
	got := testErrs.Error("migrate", err)
	require.ErrorIs(t, got, store.ErrUnavailable)
	require.ErrorIs(t, got, err, "the cause stays in the chain")
	require.Contains(t, got.Error(), "owner: migrate: tenure: store unavailable (nothing was sent, so nothing was applied): failed to connect")
	require.NotContains(t, got.Error(), "may have been applied")
}

func TestNotAttempted(t *testing.T) {
	t.Parallel()
	got := testErrs.NotAttempted("acquire", context.Canceled)
	require.ErrorIs(t, got, store.ErrUnavailable)
	require.ErrorIs(t, got, context.Canceled)
	require.Equal(t, "owner: acquire not attempted: tenure: store unavailable: context canceled", got.Error())
}

func TestCode(t *testing.T) {
	t.Parallel()
	require.Equal(t, "TF001", pgkit.Code(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "TF001"})))
	require.Empty(t, pgkit.Code(io.EOF))
	require.Empty(t, pgkit.Code(nil))
}
