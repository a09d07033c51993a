package cli

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// TestSlotNames: status's and serve's --slots N name the N slot leases of
// each NAME, and refuse what names none.
func TestSlotNames(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		names   []string
		n       int
		want    []string
		wantErr string
	}{
		"NoSlots":  {names: []string{"a", "b"}, want: []string{"a", "b"}},
		"Two":      {names: []string{"etl", "x#1"}, n: 2, want: []string{"etl#0", "etl#1", "x#1#0", "x#1#1"}},
		"Negative": {names: []string{"a"}, n: -1, wantErr: "--slots -1: a name has 1 to 256 slots"},
		"TooMany":  {names: []string{"a"}, n: 257, wantErr: "--slots 257: a name has 1 to 256 slots"},
		"NoName":   {n: 3, wantErr: "--slots needs the NAME whose slots to show"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := slotNames("status", tc.names, tc.n)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestServeSlots: serve --slots 2 NAME shows the two slot leases of NAME,
// held or never used, and no other lease.
func TestServeSlots(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	st := openSQLite(t, db)
	h := testutil.Holder(t, "host-1")
	acquire(t, st, "etl#0", h)
	acquire(t, st, "other", h)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := newLineWriter()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "--http", "127.0.0.1:0", "--slots", "2", "etl", "--store", db}, io.Discard, stderr)
	}()
	line := testutil.Receive(t, stderr.lines, "the serving line", 30*time.Second)
	m := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(m[1])
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), `data-lease="etl#0"`)
	require.Contains(t, string(page), `data-lease="etl#1"`)
	require.NotContains(t, string(page), `data-lease="other"`)
	require.Contains(t, string(page), "host-1/"+h.Instance)
	cancel()
	require.Equal(t, ExitOK, testutil.Receive(t, done, "serve's exit", 30*time.Second))
}
