// Package metrics exports what a [tenure.Client] does as Prometheus
// metrics (github.com/prometheus/client_golang). It is opt-in: nothing is
// registered until [New] is called, with the registry of your choice, and
// the client reports to it only once the [Observer] is set as
// [tenure.Config.Observer]:
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.New(metrics.Config{Registerer: reg})
//	client, err := tenure.New(store, tenure.Config{Observer: m})
//
// The root package stays standard-library only: it reports
// [tenure.Event]s through the [tenure.Observer] interface, and this package
// is one implementation of it.
//
// # Metrics
//
// The names and labels are the same for every store (the tests drive a
// handover through real clients on memstore, SQLite, PostgreSQL, Redis,
// etcd, Consul, MySQL and NATS and read the same series from each). The
// store label is the store's package name ([tenure.StoreName]: pgstore,
// redisstore, etcdstore, consulstore, mysqlstore, natsstore, sqlitestore,
// memstore, alwaysleader), or
// [Config.Store] when set; the lease label is the lease name.
//
//   - tenure_lease_held{store,lease} (gauge): 1 from the grant until the
//     tenure is found lost, then 0. Summed over a fleet it should be 1 for
//     a lease that must always have a holder.
//   - tenure_lease_holder_info{store,lease,holder} (gauge): 1 while this
//     process holds the lease, with its holder ("label/instance") as a
//     label, as client-go's leader_election_master_status gives the
//     leader's name; the series is deleted when the tenure ends, so a
//     fleet's sum shows who holds each lease now.
//   - tenure_lease_transitions_total{store,lease} (counter): changes of
//     this process's leadership of the lease, a grant or an end each; a
//     rising rate across the fleet is a lease that flaps.
//   - tenure_lease_token{store,lease} (gauge): the fencing token of the
//     current tenure, 0 while none is held.
//   - tenure_acquisitions_total{store,lease} (counter): tenures begun.
//   - tenure_losses_total{store,lease,reason} (counter): tenures ended, by
//     [Reason]: expired_locally, renew_error, superseded, expired_at_store,
//     seq_mismatch, suspended, revoked, progress_stalled, released,
//     closed, store_clock_ahead. Only released and closed are clean.
//   - tenure_acquire_errors_total{store,lease} (counter): acquisition
//     attempts that got no verdict from the store (a campaign retries
//     them; a refusal because the lease is held is not an error).
//   - tenure_renew_duration_seconds{store} (histogram): the round trip of
//     each renewal round; a client renews all its leases in one.
//   - tenure_renew_errors_total{store} (counter): renewal rounds that
//     failed; each ends the tenures it carried (promise P3).
//   - tenure_suspensions_total{store} (counter): pauses of the process
//     detected (clocks disagreeing, a timer far too late).
//   - tenure_clones_detected_total{store} (counter): renewal chains found
//     moved by another copy of the process (promise P6).
//   - tenure_notifications_total{store} (counter): release and takeover
//     announcements received from the store (stores with notifications),
//     of the leases the client wants, holds or is giving back.
//   - tenure_notification_subscriptions_total{store} (counter): times the
//     store's listener subscribed, once at start and once per reconnection;
//     a rising rate means a flapping connection to the store.
//   - tenure_campaign_wait_seconds{store,lease} (histogram): how long each
//     successful campaign waited for its grant.
//   - tenure_fence_refused_total{resource} (counter): fenced writes
//     refused for a stale token, as counted by [Observer.Fenced].
//   - tenure_build_info{version,goversion} (gauge): always 1; the labels
//     name the version of the tenure module linked into the program
//     ("(devel)" for a build from a checkout) and the Go version.
//
// Series per lease stay as few as the leases a process takes; the
// histograms per store. The reason label has the eleven values above.
//
// # Fenced writes refused
//
// The fences (packages fence/pgfence, fence/redisfence,
// fence/httpfence) return an error matching [tenure.ErrFenced] when they
// refuse a write; they do not import this package. Pass that error
// through [Observer.Fenced], which counts it by resource and returns it
// unchanged:
//
//	if err := m.Fenced(pgfence.Fence(ctx, tx, "invoices", l.Token())); err != nil {
//		return err // never log and carry on (promise P9)
//	}
//
// For httpfence's middleware, wrap its fence store:
// httpfence.FenceFunc(func(ctx context.Context, res string, tok tenure.Token) error {
// return m.Fenced(st.Fence(ctx, res, tok)) }).
//
// # OpenTelemetry
//
// OpenTelemetry users keep this package and bridge its registry with
// OpenTelemetry's Prometheus bridge, go.opentelemetry.io/contrib/bridges/prometheus:
// its NewMetricProducer(WithGatherer(reg)) is a metric producer that
// gathers the registry given to [New] at each collection, and passing it
// to the SDK's reader (go.opentelemetry.io/otel/sdk/metric:
// NewPeriodicReader(exporter, WithProducer(producer))) exports the metrics
// above through OTLP or any other OpenTelemetry exporter, with the same
// names and labels: counters as sums, gauges as gauges, histograms as
// explicit-bucket histograms. This package does not import OpenTelemetry.
package metrics
