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
	*listening
	obs *metrics.Observer
}

// listenMetrics listens on addr; serve starts answering.
func listenMetrics(addr string) (*runMetrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	obs, err := metrics.New(metrics.Config{Registerer: reg})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	l, err := listen(addr, mux)
	if err != nil {
		return nil, err
	}
	return &runMetrics{listening: l, obs: obs}, nil
}

// listening is an HTTP server on a listener of its own: run's --health and
// --metrics.
type listening struct {
	srv *http.Server
	ln  net.Listener
	wg  sync.WaitGroup
}

// listen listens on addr for h; serve starts answering.
func listen(addr string, h http.Handler) (*listening, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &listening{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}, nil
}

// serve answers requests until close.
func (l *listening) serve() {
	l.wg.Go(func() { _ = l.srv.Serve(l.ln) }) // Serve ends with ErrServerClosed at close.
}

// close stops answering; a request in flight gets its answer first, one
// that hangs on is cut after a second.
func (l *listening) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil {
		_ = l.srv.Close()
	}
	l.wg.Wait()
}
