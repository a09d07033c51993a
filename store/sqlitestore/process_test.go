package sqlitestore_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// runChildren re-executes the test binary n times with the given role on
// path, starts them together and waits for all of them to succeed.
func runChildren(t *testing.T, role, path string, n int, extraEnv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel()
	type child struct {
		cmd   *exec.Cmd
		out   *bytes.Buffer
		ready *bufio.Reader
		start io.Closer
	}
	children := make([]child, n)
	for i := range children {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			childRole+"="+role,
			childPath+"="+path,
			childIndex+"="+strconv.Itoa(i),
		)
		cmd.Env = append(cmd.Env, extraEnv...)
		out := new(bytes.Buffer)
		cmd.Stderr = out
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		children[i] = child{cmd: cmd, out: out, ready: bufio.NewReader(stdout), start: stdin}
	}
	// Every child reports ready; closing every standard input then
	// releases all of them at once.
	for i, c := range children {
		if line, err := c.ready.ReadString('\n'); line != "ready\n" {
			_ = c.cmd.Wait() // Its exit status matters less than its output.
			t.Fatalf("child %d did not get ready (%q, %v):\n%s", i, line, err, c.out.String())
		}
	}
	for _, c := range children {
		require.NoError(t, c.start.Close())
	}
	for i, c := range children {
		require.NoError(t, c.cmd.Wait(), "child %d failed:\n%s", i, c.out.String())
	}
}

func TestProcesses(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentOpenOfFreshFile", func(t *testing.T) {
		t.Parallel()
		const n = 6
		path := filepath.Join(t.TempDir(), "fresh", "tenure.db")
		runChildren(t, "open", path, n)

		st := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
		var version, counters int
		require.NoError(t, st.DB().QueryRowContext(t.Context(), "PRAGMA user_version").Scan(&version))
		require.Equal(t, sqlitestore.SchemaVersion, version)
		require.NoError(t, st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM tenure_counter").Scan(&counters))
		require.Equal(t, 1, counters)
		recs, err := st.List(t.Context())
		require.NoError(t, err)
		require.Len(t, recs, n)
		seen := map[store.Token]bool{}
		for _, r := range recs {
			require.Equal(t, store.StateHeld, r.State, "lease %s", r.Name)
			require.False(t, seen[r.Token], "token %d handed out twice", r.Token)
			seen[r.Token] = true
		}
	})

	t.Run("RacingAcquirers", func(t *testing.T) {
		t.Parallel()
		const n, want = 4, 25
		path := filepath.Join(t.TempDir(), "race.db")
		runChildren(t, "race", path, n, childWant+"="+strconv.Itoa(want))

		st := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
		ctx := t.Context()
		rows, err := st.DB().QueryContext(ctx, "SELECT token, holder FROM grants ORDER BY id")
		require.NoError(t, err)
		defer rows.Close()
		var last store.Token
		perHolder := map[string]int{}
		count := 0
		for rows.Next() {
			var tok store.Token
			var holder string
			require.NoError(t, rows.Scan(&tok, &holder))
			require.Greater(t, tok, last, "grant %d: tokens must strictly increase in acquisition order", count)
			last = tok
			perHolder[holder]++
			count++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, n*want, count)
		require.Len(t, perHolder, n)

		var holding, fence int64
		require.NoError(t, st.DB().QueryRowContext(ctx, "SELECT count(*) FROM holding").Scan(&holding))
		require.Zero(t, holding)
		require.NoError(t, st.DB().QueryRowContext(ctx, "SELECT token FROM tenure_fence WHERE resource = ?", raceResource).Scan(&fence))
		require.Equal(t, int64(last), fence)

		rec, err := st.Get(ctx, raceLease)
		require.NoError(t, err)
		require.Equal(t, store.StateReleased, rec.State)
		require.Equal(t, last, rec.Token)
	})
}
