// Package serve is the status server of `tenure serve`: it reads a store at
// intervals and serves what it saw over HTTP, rendered on the server with
// html/template (the page has no script, and its Content-Security-Policy
// forbids any).
//
//	srv, err := serve.New(serve.Config{Store: st, StoreDisplay: "sqlite:/var/lib/tenure.db"})
//	go srv.Run(ctx)
//	http.ListenAndServe("127.0.0.1:8080", srv.Handler())
//
// # The page
//
// / shows the lease table (name, state, holder, token, seq, remaining time
// and acquisition time, all by the store's clock at the last read), the
// fleet registry's agents when [Config.Registry] is set, a timeline drawn
// as inline SVG of each lease's holders (the holders shown take ten colours in the order first seen, so up to ten never share one) and tokens
// since the server started, and the latest [MaxRecentChanges] changes the
// server observed.
// It reloads itself every [RefreshSeconds] seconds.
//
// When the store keeps a history of its own ([store.Historian]: PostgreSQL,
// SQLite), every read also fetches its latest [MaxStoreEvents] events, and
// the page's "Store history" section lists them (newest first, by the
// store's clock, with the tenure each new one replaced) and draws them as a
// second timeline: each tenure from its grant to its release or to the
// next tenure. The store records no expiry (nothing runs at that moment),
// so a tenure whose lease the last read no longer showed held is drawn to
// the last read, faded. Other stores get a note saying which stores keep
// history.
//
// The history is the server's own observation, kept in memory: a change of
// holder, token or state is recorded when a read shows it, at most
// [Config.History] per lease, so a tenure that began and ended between two
// reads is missing, and nothing from before the server started is shown.
// The page says so.
//
// Lease names, holders, agent ids, addresses and labels are user data:
// html/template escapes them, and every invisible or format character
// (bidi overrides and isolates, zero-width characters, other controls) or
// byte that is not UTF-8 is shown as a visible escape such as [U+202E],
// never raw, so a name cannot disguise itself as another.
//
// # Reads
//
// [Server.Run] reads the store every [Config.Interval], and also soon
// after a release or takeover is announced by a store that implements
// [store.Notifier]. A read lists every lease ([store.Lister]) or gets the
// names in [Config.Names]; each read is bounded by [Config.ReadTimeout].
//
// # /metrics
//
// Prometheus text exposition of the server's own registry (not the
// default one): the Go runtime and process collectors, and the store as
// the last successful read saw it:
//
//   - tenure_serve_store_up (gauge): 1 while /healthz answers 200.
//   - tenure_serve_store_read_age_seconds (gauge): since the last
//     successful read.
//   - tenure_serve_store_reads_total{outcome} (counter): reads, ok or error.
//   - tenure_serve_leases{state} (gauge): leases held, expired, released
//     and absent.
//   - tenure_serve_lease_held{lease}, tenure_serve_lease_token{lease},
//     tenure_serve_lease_remaining_seconds{lease} (gauges): per lease, for
//     the first [MaxRows] leases by name.
//
// These are the store's view, read by one process; the lease clients' own
// view (tenure_lease_held and the rest) comes from package metrics in each
// holder process.
//
// # /healthz
//
// 200 with a line starting "ok:" when the last read of the store succeeded
// and returned less than [Config.HealthyWithin] ago; otherwise 503 with a
// line starting "unhealthy:" that says why (the read's error, or how long
// ago the store last answered).
package serve
