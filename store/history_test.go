package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

func TestHistoryParamsValidate(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		p       store.HistoryParams
		wantErr string
	}{
		"Zero":          {p: store.HistoryParams{}},
		"Full":          {p: store.HistoryParams{Name: "job", Since: time.Unix(0, 0), Limit: store.MaxHistoryLimit}},
		"LastYear":      {p: store.HistoryParams{Since: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}},
		"NegativeLimit": {p: store.HistoryParams{Limit: -1}, wantErr: "history limit -1 is outside 0–10000 (0 means 100)"},
		"HugeLimit":     {p: store.HistoryParams{Limit: store.MaxHistoryLimit + 1}, wantErr: "history limit 10001 is outside"},
		"SinceTooEarly": {p: store.HistoryParams{Since: time.Unix(-1, 0)}, wantErr: "history since 1969-12-31T23:59:59Z is outside 1970–9999"},
		"SinceTooLate":  {p: store.HistoryParams{Since: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, wantErr: "is outside 1970–9999"},
		"BadName":       {p: store.HistoryParams{Name: "a\u202eb"}, wantErr: "bidirectional control U+202E"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := tc.p.Validate()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
	require.Equal(t, store.DefaultHistoryLimit, store.HistoryParams{}.EffectiveLimit())
	require.Equal(t, 7, store.HistoryParams{Limit: 7}.EffectiveLimit())
}

func TestEventKind(t *testing.T) {
	t.Parallel()
	for k, want := range map[store.EventKind]string{
		store.EventGranted: "granted", store.EventTakenOver: "taken-over",
		store.EventReleased: "released", store.EventForceReleased: "force-released",
	} {
		require.Equal(t, want, k.String())
		got, err := store.ParseEventKind(want)
		require.NoError(t, err)
		require.Equal(t, k, got)
	}
	require.Equal(t, "EventKind(0)", store.EventKind(0).String())
	require.Equal(t, "EventKind(9)", store.EventKind(9).String())
	_, err := store.ParseEventKind("expired")
	require.ErrorIs(t, err, store.ErrInvalid)
}
