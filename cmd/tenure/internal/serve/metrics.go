package serve

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tenure-dev/tenure/store"
)

// The metrics of /metrics that describe the store as this server read it.
var (
	descUp = prometheus.NewDesc("tenure_serve_store_up",
		"1 when the last read of the store succeeded within the health bound (as /healthz answers 200), else 0.", nil, nil)
	descReadAge = prometheus.NewDesc("tenure_serve_store_read_age_seconds",
		"Seconds since the last successful read of the store; absent before the first.", nil, nil)
	descLeases = prometheus.NewDesc("tenure_serve_leases",
		"Leases by state (held, expired, released, absent) by the store's clock at the last successful read.", []string{"state"}, nil)
	descHeld = prometheus.NewDesc("tenure_serve_lease_held",
		"1 when the lease was held by the store's clock at the last successful read, else 0.", []string{"lease"}, nil)
	descToken = prometheus.NewDesc("tenure_serve_lease_token",
		"The fencing token of the lease's current or last tenure at the last successful read; 0 if it never had one.", []string{"lease"}, nil)
	descRemaining = prometheus.NewDesc("tenure_serve_lease_remaining_seconds",
		"Seconds left before the lease expires by the store's clock, at the last successful read; 0 when not held.", []string{"lease"}, nil)
)

// initMetrics makes the server's own registry: the collector below, the
// read counter, and the Go runtime and process collectors.
func (s *Server) initMetrics() error {
	s.registry = prometheus.NewRegistry()
	s.reads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tenure_serve_store_reads_total",
		Help: "Reads of the store by this server, by outcome (ok, error).",
	}, []string{"outcome"})
	s.reads.WithLabelValues("ok")
	s.reads.WithLabelValues("error")
	for _, c := range []prometheus.Collector{
		s.reads, storeCollector{s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := s.registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// storeCollector reports the last successful read at each scrape, so a
// lease that disappears from the store leaves no stale series behind.
type storeCollector struct{ s *Server }

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descReadAge, descLeases, descHeld, descToken, descRemaining} {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	up, _ := c.s.health(now)
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, b2f(up))
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	last := c.s.last
	if last == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descReadAge, prometheus.GaugeValue, now.Sub(last.at).Seconds())
	counts := map[string]int{"held": 0, "expired": 0, "released": 0, "absent": 0}
	for i, r := range last.leases {
		counts[stateName(r.State)]++
		if i >= MaxRows {
			continue
		}
		held := r.State == store.StateHeld
		rem := 0.0
		if held {
			rem = r.Remaining.Seconds()
		}
		gauge(ch, descHeld, b2f(held), r.Name)
		gauge(ch, descToken, float64(r.Token), r.Name)
		gauge(ch, descRemaining, rem, r.Name)
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(descLeases, prometheus.GaugeValue, float64(n), state)
	}
}

// gauge sends one gauge; a lease name Prometheus cannot carry as a label
// value (not UTF-8, which no store accepts) is left out rather than
// failing the scrape.
func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, lease string) {
	if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, lease); err == nil {
		ch <- m
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
