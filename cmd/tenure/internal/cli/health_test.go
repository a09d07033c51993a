package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/memstore"
)

// TestProbes reads each probe of run --health through a standby, a
// holder, a wedged holder and a run whose tenure ended: a standby is alive
// and ready (a rolling update's new pod becomes ready), a wedged holder is
// not alive, and only a trusted holder with fresh progress is the leader.
func TestProbes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New(memstore.Config{})
		defer func() { _ = st.Close() }()
		client, err := tenure.New(st, tenure.Config{TTL: 30 * time.Second})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan error, 1)
		go func() { ran <- client.Run(ctx) }()
		defer func() {
			cancel()
			require.NoError(t, <-ran)
		}()

		h := &health{name: "nightly", progressTimeout: time.Minute}
		probe := func(path string) int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			body, err := io.ReadAll(rec.Result().Body)
			require.NoError(t, err)
			require.NotEmpty(t, body, "every answer says why")
			return rec.Code
		}
		type answers struct{ live, ready, leader, healthz int }
		read := func() answers {
			return answers{probe("/livez"), probe("/readyz"), probe("/leaderz"), probe("/healthz")}
		}
		const ok, no = http.StatusOK, http.StatusServiceUnavailable

		require.Equal(t, answers{ok, ok, no, no}, read(), "a standby waiting for the lease")

		lease, err := client.Acquire(t.Context(), "nightly")
		require.NoError(t, err)
		h.held(lease)
		require.Equal(t, answers{ok, ok, ok, ok}, read(), "a holder with fresh progress")

		time.Sleep(time.Minute) // the bubble's virtual time: the progress bound passes, renewals go on
		require.Equal(t, answers{no, ok, no, no}, read(), "a wedged holder is not alive")

		h.progressed()
		require.Equal(t, answers{ok, ok, ok, ok}, read(), "progress again")

		require.NoError(t, lease.Release(t.Context()))
		require.Equal(t, answers{ok, no, no, no}, read(), "the tenure ended: alive while it exits, no longer ready")

		require.Equal(t, http.StatusNotFound, probe("/metrics"))
	})
}
