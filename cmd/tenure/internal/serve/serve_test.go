package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// openSQLite opens a fresh SQLite store of the test's own.
func openSQLite(t *testing.T) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() }) // some tests close it themselves
	return st
}

func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}

func acquire(t *testing.T, st store.Store, name string, h store.Holder) store.Grant {
	t.Helper()
	g, err := st.Acquire(context.Background(), store.AcquireParams{Name: name, Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	return g
}

func release(t *testing.T, st store.Store, g store.Grant) {
	t.Helper()
	require.NoError(t, st.Release(context.Background(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}))
}

// get fetches path from h and returns the status and body.
func get(t *testing.T, h http.Handler, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, rec.Result().Header, string(body)
}

// noLister is a store that cannot list its leases.
type noLister struct{ store.Store }

func TestNewValidates(t *testing.T) {
	t.Parallel()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"NoStore", Config{}, "no store"},
		{"BadName", Config{Store: st, Names: []string{"a\nb"}}, "control character"},
		{"NegativeInterval", Config{Store: st, Interval: -time.Second}, "must not be negative"},
		{"HealthBoundBelowInterval", Config{Store: st, Interval: 5 * time.Second, HealthyWithin: 2 * time.Second}, "HealthyWithin (2s) must be greater than Interval (5s)"},
		{"CannotList", Config{Store: noLister{st}}, "cannot list its leases; name the leases"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.cfg)
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := New(Config{Store: noLister{st}, Names: []string{"a"}})
	require.NoError(t, err, "a store that cannot list serves the leases named")
}

// TestPagePayload: the lease table shows the payload the holder published,
// escaped like every other text from the store.
func TestPagePayload(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newServer(t, Config{Store: st, StoreDisplay: "sqlite:test.db"})
	_, err := st.Acquire(context.Background(), store.AcquireParams{Name: "primary", Holder: testutil.Holder(t, "api-1"),
		TTL: time.Minute, Payload: "10.0.0.7:8443\u3164<b>x</b>"})
	require.NoError(t, err)
	acquire(t, st, "plain", testutil.Holder(t, "api-2"))
	require.NoError(t, s.Refresh(context.Background()))
	code, _, body := get(t, s.Handler(), "/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<th>Payload</th>`)
	require.Contains(t, body, `<td class="payload">10.0.0.7:8443<span class="esc" title="invisible or format character">[U+3164]</span>&lt;b&gt;x&lt;/b&gt;</td>`)
	require.Contains(t, body, `<td class="payload">-</td>`, "a lease without a payload")
}

// TestPage renders the page over a real SQLite store: a lease held, then
// released and taken by another holder, with a name and a label that try
// to inject markup and hide characters.
func TestPage(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newServer(t, Config{Store: st, StoreDisplay: "sqlite:test.db"})
	h := s.Handler()

	code, _, body := get(t, h, "/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "The store has not answered yet.")

	// A no-break space and a Hangul filler: stores accept both, and
	// neither shows as what it is.
	const name = "billing\u00A0\u3164<b>x</b>"
	first := testutil.Holder(t, `host-1"><script>alert(1)</script>`)
	g1 := acquire(t, st, name, first)
	require.NoError(t, s.Refresh(context.Background()))
	code, hdr, body := get(t, h, "/")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "text/html; charset=utf-8", hdr.Get("Content-Type"))
	require.Contains(t, hdr.Get("Content-Security-Policy"), "default-src 'none'")
	require.Contains(t, body, `<meta http-equiv="refresh" content="2">`)
	require.NotContains(t, body, "<script")
	require.NotContains(t, body, "<b>x</b>")
	require.NotContains(t, body, "\u00A0")
	require.NotContains(t, body, "\u3164")
	esc := func(r string) string {
		return `<span class="esc" title="invisible or format character">[` + r + `]</span>`
	}
	require.Contains(t, body, `<td class="name">billing`+esc("U+00A0")+esc("U+3164")+`&lt;b&gt;x&lt;/b&gt;</td>`)
	require.Contains(t, body, `data-lease="billing[U&#43;00A0][U&#43;3164]&lt;b&gt;x&lt;/b&gt;"`)
	require.Contains(t, body, "host-1&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;/"+first.Instance)
	require.Contains(t, body, `<td class="state">held</td>`)
	require.Contains(t, body, "1 held of 1")
	require.Contains(t, body, `fill="`+palette[0]+`"`, "the first holder's colour on the timeline")
	require.Contains(t, body, "first seen: held by")
	require.Contains(t, body, "<title>billing[U&#43;00A0][U&#43;3164]&lt;b&gt;x&lt;/b&gt;: held by host-1&#34;", "a bar's tooltip names the holder")
	require.Contains(t, body, "a change between two reads, and everything before this server started, is not shown")
	require.NotContains(t, body, `id="agents"`, "no registry, no agents section")

	release(t, st, g1)
	require.NoError(t, s.Refresh(context.Background()))
	second := testutil.Holder(t, "host-2")
	g2 := acquire(t, st, name, second)
	require.NoError(t, s.Refresh(context.Background()))
	_, _, body = get(t, h, "/")
	require.Contains(t, body, "held by host-2/"+second.Instance+" with token "+g2.Token.String())
	require.Contains(t, body, "released (last holder host-1")
	require.Contains(t, body, `fill="`+palette[1]+`"`, "the second holder has a colour of its own")
	require.Contains(t, body, `fill="`+idleFill+`"`, "the released interval is drawn grey")
	require.Contains(t, body, ">#"+g1.Token.String()+"</text>", "the token is written on the timeline")
	observed, recorded, ok := strings.Cut(body, `<section id="store-history">`)
	require.True(t, ok, "the page has the store's history")
	require.Equal(t, 3, strings.Count(observed, `<rect class="seg"`), "held, released, held again")
	require.Equal(t, 3, strings.Count(recorded, `<rect class="seg"`), "granted, released, granted again, as the store recorded them")
	require.Contains(t, recorded, `<svg class="timeline"`)
	require.Contains(t, recorded, ">#"+g2.Token.String()+"</text>")
	escName := `<td class="name">billing` + esc("U+00A0") + esc("U+3164") + `&lt;b&gt;x&lt;/b&gt;</td>`
	require.Contains(t, recorded, `<tr class="event event-granted"><td>`, "the newest event first")
	require.Regexp(t, `(?s)event-granted.*`+regexp.QuoteMeta(escName)+`<td>granted</td>.*host-2/`+second.Instance+
		`.*<td class="num">`+g2.Token.String()+`</td><td>host-1&#34;&gt;&lt;script&gt;alert\(1\)&lt;/script&gt;/`+first.Instance+
		` \(token `+g1.Token.String()+`\)</td>.*event-released.*event-granted`, recorded)

	code, hdr, css := get(t, h, "/style.css")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "text/css; charset=utf-8", hdr.Get("Content-Type"))
	require.Contains(t, css, "svg.timeline")
	code, _, _ = get(t, h, "/nothing-here")
	require.Equal(t, http.StatusNotFound, code)
}

// TestPageWithoutStoreHistory: a store that keeps no history gets a note
// saying which stores do, and no table.
func TestPageWithoutStoreHistory(t *testing.T) {
	t.Parallel()
	st := struct{ store.Store }{memstore.New(memstore.Config{})}
	s := newServer(t, Config{Store: st, Names: []string{"job"}})
	acquire(t, st, "job", testutil.Holder(t, "host"))
	require.NoError(t, s.Refresh(context.Background()))
	_, _, body := get(t, s.Handler(), "/")
	_, recorded, ok := strings.Cut(body, `<section id="store-history">`)
	require.True(t, ok)
	require.Contains(t, recorded, "This store keeps no history of its leases; only the PostgreSQL and SQLite stores do.")
	require.NotContains(t, recorded, "<table>")
}

// TestStoreTimeline: a tenure the store recorded no end of is drawn to the
// last read, faded unless that read still showed it held.
// TestColoursAreDistinct: the holders a page shows take the palette's
// colours in the order first seen, so no two of up to len(palette)
// holders share one, and more reuse them in turn.
func TestColoursAreDistinct(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	var seen []sighting
	holders := make([]store.Holder, len(palette)+2)
	for i := range holders {
		holders[i] = store.Holder{Label: "host", Instance: fmt.Sprint(i)}
		// Seen again later, and in an order other than the first sightings'.
		seen = append(seen, sighting{holders[i], at.Add(time.Hour - time.Duration(i)*time.Second)})
		seen = append(seen, sighting{holders[i], at.Add(time.Duration(i) * time.Second)})
	}
	c := assignColours(seen)
	require.Len(t, c, len(holders))
	used := map[string]bool{}
	for i, h := range holders[:len(palette)] {
		require.Equal(t, palette[i], c.of(h), "holder %d takes the palette's colours in the order first seen", i)
		used[c.of(h)] = true
	}
	require.Len(t, used, len(palette), "no two of the first %d holders share a colour", len(palette))
	require.Equal(t, palette[0], c.of(holders[len(palette)]), "past the palette, colours are reused in turn")
	require.Equal(t, palette[1], c.of(holders[len(palette)+1]))
}

func TestStoreTimeline(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	a, b := store.Holder{Label: "a", Instance: "1"}, store.Holder{Label: "b", Instance: "2"}
	events := []store.HistoryEvent{
		{Name: "job", Kind: store.EventGranted, Holder: a, Token: 5, At: at},
		{Name: "job", Kind: store.EventTakenOver, Holder: b, Token: 7, PreviousHolder: a, PreviousToken: 5, At: at.Add(time.Minute)},
		{Name: "other", Kind: store.EventGranted, Holder: a, Token: 6, At: at.Add(30 * time.Second)},
		{Name: "other", Kind: store.EventForceReleased, Holder: a, Token: 6, At: at.Add(40 * time.Second)},
	}
	c := colours{a: palette[3], b: palette[4]}
	require.Nil(t, storeTimeline(nil, nil, at, c))
	now := at.Add(2 * time.Minute)
	tl := storeTimeline(events, []store.Record{{Grant: store.Grant{Name: "job", Holder: b, Token: 7}, State: store.StateHeld}}, now, c)
	require.Equal(t, 2, tl.Shown)
	require.Equal(t, "job", tl.Rows[0].Name)
	job := tl.Rows[0].Segments
	require.Len(t, job, 2)
	require.Equal(t, palette[3], job[0].Fill)
	require.Equal(t, palette[4], job[1].Fill)
	require.False(t, job[1].Faded, "still held at the last read")
	require.InDelta(t, tl.PlotX+tl.PlotW, job[1].X+job[1].W, 0.2, "drawn to now")
	other := tl.Rows[1].Segments
	require.Equal(t, []string{palette[3], idleFill}, []string{other[0].Fill, other[1].Fill})

	tl = storeTimeline(events, nil, now, c)
	require.True(t, tl.Rows[0].Segments[1].Faded, "not held at the last read: its end is unknown")
	require.Contains(t, tl.Rows[0].Segments[1].Title, "the store records no expiry time")

	// The events of windows (tenure run --once-per) change no hands.
	windows := append(slices.Clone(events[:1]),
		store.HistoryEvent{Name: "job", Kind: store.EventWindowStarted, Holder: a, Token: 5, At: at.Add(10 * time.Second), Window: "w"},
		store.HistoryEvent{Name: "job", Kind: store.EventWindowCompleted, Holder: a, Token: 5, At: at.Add(20 * time.Second), Window: "w"})
	windows = append(windows, events[1:]...)
	tl = storeTimeline(windows, []store.Record{{Grant: store.Grant{Name: "job", Holder: b, Token: 7}, State: store.StateHeld}}, now, c)
	require.Len(t, tl.Rows[0].Segments, 2, "a window's events draw no segment")
}

// TestPageEscapesBidi shows a row whose name and label hold a bidi
// override, as a row written before names were checked (or by hand) can:
// the page shows the override escaped, never raw.
func TestPageEscapesBidi(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	acquire(t, st, "plain", testutil.Holder(t, "host"))
	_, err := st.DB().ExecContext(context.Background(),
		"UPDATE tenure_leases SET name = ?, holder_label = ? WHERE name = 'plain'", "invoice\u202Efdp.exe", "ho\u2067st\u200B")
	require.NoError(t, err)
	s := newServer(t, Config{Store: st})
	require.NoError(t, s.Refresh(context.Background()))
	_, _, body := get(t, s.Handler(), "/")
	for _, r := range []string{"\u202E", "\u2067", "\u200B"} {
		require.NotContains(t, body, r, "a bidi or zero-width character must never reach the page raw")
	}
	require.Contains(t, body, `<td class="name">invoice<span class="esc" title="invisible or format character">[U+202E]</span>fdp.exe</td>`)
	require.Contains(t, body, `ho<span class="esc" title="invisible or format character">[U+2067]</span>st<span class="esc" title="invisible or format character">[U+200B]</span>/`)
	require.Contains(t, body, `<text class="lease-name" x="4" y="28"><title>invoice[U&#43;202E]fdp.exe</title>`)
}

func TestNamedLeases(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	acquire(t, st, "shown", testutil.Holder(t, "h"))
	acquire(t, st, "other", testutil.Holder(t, "h"))
	s := newServer(t, Config{Store: noLister{st}, Names: []string{"shown", "never-used"}})
	require.NoError(t, s.Refresh(context.Background()))
	_, _, body := get(t, s.Handler(), "/")
	require.Contains(t, body, `data-lease="shown"`)
	require.Contains(t, body, `<tr class="lease state-absent" data-lease="never-used">`)
	require.NotContains(t, body, `data-lease="other"`)
}

// TestHiddenLeases: a lease Config.Hidden names is left out of the list of
// every lease (page and /metrics), and shown when named.
func TestHiddenLeases(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	acquire(t, st, "shown", testutil.Holder(t, "h"))
	acquire(t, st, "doctor", testutil.Holder(t, "h"))
	hidden := func(name string) bool { return name == "doctor" }

	s := newServer(t, Config{Store: st, Hidden: hidden})
	require.NoError(t, s.Refresh(context.Background()))
	_, _, page := get(t, s.Handler(), "/")
	require.Contains(t, page, `data-lease="shown"`)
	require.NotContains(t, page, `data-lease="doctor"`)
	_, _, metrics := get(t, s.Handler(), "/metrics")
	require.Contains(t, metrics, `tenure_serve_lease_held{lease="shown"} 1`)
	require.NotContains(t, metrics, `lease="doctor"`)
	require.Contains(t, metrics, `tenure_serve_leases{state="held"} 1`+"\n")

	named := newServer(t, Config{Store: st, Names: []string{"doctor"}, Hidden: hidden})
	require.NoError(t, named.Refresh(context.Background()))
	_, _, page = get(t, named.Handler(), "/")
	require.Contains(t, page, `data-lease="doctor"`)
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newServer(t, Config{Store: st, StoreDisplay: "sqlite:test.db"})
	h := s.Handler()

	code, _, body := get(t, h, "/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "unhealthy: sqlite:test.db has not been read yet\n", body)

	require.NoError(t, s.Refresh(context.Background()))
	code, _, body = get(t, h, "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Regexp(t, `^ok: sqlite:test.db answered \S+ ago in \S+\n$`, body)

	ok, reason := s.health(time.Now().Add(DefaultHealthyWithin + time.Second))
	require.False(t, ok, "a read older than the bound is unhealthy")
	require.Contains(t, reason, "last answered")
	require.Contains(t, reason, "more than 10s")

	require.NoError(t, st.Close())
	require.ErrorIs(t, s.Refresh(context.Background()), store.ErrClosed)
	code, _, body = get(t, h, "/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Regexp(t, `^unhealthy: the last read of sqlite:test.db failed \S+ ago: [^\n]+\n$`, body)
	_, _, page := get(t, h, "/")
	require.Contains(t, page, "store unhealthy")
	_, _, metrics := get(t, h, "/metrics")
	require.Contains(t, metrics, "tenure_serve_store_up 0\n")
	require.Contains(t, metrics, `tenure_serve_store_reads_total{outcome="error"} 1`+"\n")
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newServer(t, Config{Store: st})
	h := s.Handler()
	_, _, body := get(t, h, "/metrics")
	require.Contains(t, body, "tenure_serve_store_up 0\n")
	require.NotContains(t, body, "tenure_serve_store_read_age_seconds ", "no read, no age")

	g := acquire(t, st, "held-one", testutil.Holder(t, "h"))
	g2 := acquire(t, st, "released-one", testutil.Holder(t, "h"))
	release(t, st, g2)
	require.NoError(t, s.Refresh(context.Background()))
	code, hdr, body := get(t, h, "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, hdr.Get("Content-Type"), "text/plain")
	for _, want := range []string{
		"tenure_serve_store_up 1\n",
		`tenure_serve_lease_held{lease="held-one"} 1` + "\n",
		`tenure_serve_lease_token{lease="held-one"} ` + g.Token.String() + "\n",
		`tenure_serve_lease_held{lease="released-one"} 0` + "\n",
		`tenure_serve_lease_token{lease="released-one"} ` + g2.Token.String() + "\n",
		`tenure_serve_lease_remaining_seconds{lease="released-one"} 0` + "\n",
		`tenure_serve_leases{state="held"} 1` + "\n",
		`tenure_serve_leases{state="released"} 1` + "\n",
		`tenure_serve_leases{state="expired"} 0` + "\n",
		`tenure_serve_store_reads_total{outcome="ok"} 1` + "\n",
		"tenure_serve_store_read_age_seconds ",
		"go_goroutines ",
	} {
		require.Contains(t, body, want)
	}
	require.Regexp(t, `tenure_serve_lease_remaining_seconds\{lease="held-one"\} [1-6]\d\.\d+`, body)
}

// TestHistoryBounded checks that a lease keeps at most Config.History
// changes, the latest.
func TestHistoryBounded(t *testing.T) {
	t.Parallel()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	s := newServer(t, Config{Store: st, History: 3})
	var last store.Grant
	for range 5 {
		last = acquire(t, st, "job", testutil.Holder(t, "h"))
		require.NoError(t, s.Refresh(context.Background()))
		release(t, st, last)
		require.NoError(t, s.Refresh(context.Background()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changes := s.history["job"].changes
	require.Len(t, changes, 3)
	require.Equal(t, store.StateReleased, changes[2].state)
	require.Equal(t, last.Token, changes[2].token)
	require.Equal(t, store.StateHeld, changes[1].state)
	require.Equal(t, last.Token, changes[1].token)
	require.False(t, changes[0].first)
	tl := s.buildTimeline(s.started, time.Now(), s.pageColours())
	require.Len(t, tl.Rows, 1)
	require.Len(t, tl.Rows[0].Segments, 3)
	require.Greater(t, tl.Rows[0].Segments[0].X, tl.PlotX, "the changes dropped from the history are not drawn as the oldest one kept")
	require.Len(t, s.recent, 10, "one first sighting and nine changes")
	require.Equal(t, "job", s.recent[9].name)
	require.Equal(t, store.StateReleased, s.recent[9].c.state)
}

// TestRunReadsOnNotification checks that Run reads the store when it
// announces a takeover, long before the next interval.
func TestRunReadsOnNotification(t *testing.T) {
	t.Parallel()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	s := newServer(t, Config{Store: st, Interval: time.Hour, HealthyWithin: 2 * time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, testutil.Receive(t, done, "Run's return", 10*time.Second))
	})
	require.Eventually(t, func() bool { ok, _ := s.health(time.Now()); return ok }, 10*time.Second, 10*time.Millisecond, "the first read")
	g := acquire(t, st, "job", testutil.Holder(t, "h"))
	release(t, st, g) // announced
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		h := s.history["job"]
		return h != nil && h.changes[len(h.changes)-1].state == store.StateReleased
	}, 10*time.Second, 10*time.Millisecond, "a read after the release was announced")
}

func TestTickStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ span, want time.Duration }{
		{3 * time.Second, time.Second},
		{40 * time.Second, 5 * time.Second},
		{10 * time.Minute, 2 * time.Minute},
		{5 * time.Hour, time.Hour},
		{30 * 24 * time.Hour, 24 * time.Hour},
	} {
		require.Equal(t, tc.want, tickStep(tc.span), "span %s", tc.span)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	h := store.Holder{Label: "a", Instance: "b"}
	require.Equal(t, "held by a/b with token 7", describe(change{state: store.StateHeld, holder: h, token: 7}))
	require.Equal(t, "first seen: expired (last holder a/b, token 7)", describe(change{state: store.StateExpired, holder: h, token: 7, first: true}))
	require.True(t, strings.HasPrefix(describe(change{}), "absent"))
}

// TestRowsBounded checks the page's and the scrape's bounds on a store with
// more leases than they list.
func TestRowsBounded(t *testing.T) {
	t.Parallel()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	const n = MaxRows + 2
	h := testutil.Holder(t, "h")
	for i := range n {
		acquire(t, st, fmt.Sprintf("lease-%04d", i), h)
	}
	s := newServer(t, Config{Store: st})
	require.NoError(t, s.Refresh(context.Background()))
	_, _, body := get(t, s.Handler(), "/")
	require.Equal(t, MaxRows, strings.Count(body, `<tr class="lease `))
	require.Contains(t, body, fmt.Sprintf("%d held of %d", n, n))
	require.Contains(t, body, fmt.Sprintf("2 more leases are not listed: the page shows the first %d by name.", MaxRows))
	require.NotContains(t, body, fmt.Sprintf(`data-lease="lease-%04d"`, n-1))
	observed, recorded, ok := strings.Cut(body, `<section id="store-history">`)
	require.True(t, ok)
	require.Equal(t, MaxTimelineLeases, strings.Count(observed, `<g class="row">`))
	require.Contains(t, observed, fmt.Sprintf("Showing the %d leases of %d that changed most recently.", MaxTimelineLeases, n))
	require.Equal(t, MaxTimelineLeases, strings.Count(recorded, `<g class="row">`), "the store's history is drawn as bounded")
	require.Equal(t, MaxStoreEvents, strings.Count(recorded, `<tr class="event `))
	_, _, metrics := get(t, s.Handler(), "/metrics")
	require.Equal(t, MaxRows, strings.Count(metrics, "tenure_serve_lease_held{"))
	require.Contains(t, metrics, fmt.Sprintf(`tenure_serve_leases{state="held"} %d`, n)+"\n")
	require.Equal(t, MaxRecentChanges, strings.Count(body, "first seen: held by"), "the history lists the latest changes only")
}
