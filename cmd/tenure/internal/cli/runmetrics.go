package cli

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tenure-dev/tenure/metrics"
)

// runMetrics serves run --metrics: GET /metrics answers with the lease
// client's metrics (package metrics: tenure_lease_held,
// tenure_lease_holder_info, tenure_losses_total and the rest, and
// tenure_build_info) and the Go runtime's and the process's, so that a
// job under a lease is observable without tenure serve.
type runMetrics struct {
	obs *metrics.Observer
	srv *http.Server
	ln  net.Listener
	wg  sync.WaitGroup
}

// listenMetrics listens on addr; serve starts answering.
func listenMetrics(addr string) (*runMetrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	obs, err := metrics.New(metrics.Config{Registerer: reg})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return &runMetrics{obs: obs, ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}, nil
}

// serve answers requests until close.
func (m *runMetrics) serve() {
	m.wg.Go(func() { _ = m.srv.Serve(m.ln) }) // Serve ends with ErrServerClosed at close.
}

// close stops answering; a scrape in flight gets its answer first.
func (m *runMetrics) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		_ = m.srv.Close() // A scrape that hangs on: cut it.
	}
	m.wg.Wait()
}
