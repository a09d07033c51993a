package tenure_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
)

// A Lease logged with slog shows its name, token and holder, and nothing of
// its internals, while it is held and after it ended.
func TestLeaseLogsAsNameTokenAndHolder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := setup(t, nil, tenure.Config{TTL: ttl})
		l := a.acquire(t, "billing")
		token := l.Token()

		logged := func() map[string]any {
			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, nil)).Info("work", "lease", l)
			var line struct {
				Lease map[string]any `json:"lease"`
			}
			require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
			return line.Lease
		}
		want := map[string]any{
			"name":   "billing",
			"token":  float64(token), // a JSON number
			"holder": a.client.Holder().String(),
		}
		require.Equal(t, want, logged())

		require.NoError(t, l.Release(t.Context()))
		<-l.Done()
		require.Equal(t, want, logged(), "an ended tenure still logs the token it was granted")
	})
}
