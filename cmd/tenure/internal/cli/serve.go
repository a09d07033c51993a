package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/doctor"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/serve"
	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store"
)

func serveCommand() *command {
	return &command{
		summary:      "serve a status page, /metrics and /healthz over HTTP",
		synopsis:     "serve --http ADDR [NAME...] [--slots N] [--interval 1s] [--store URL]",
		interspersed: true,
		about: `Serve reads the store every --interval (and at once when a store with
notifications announces a release or takeover) and serves, on --http ADDR
(e.g. 127.0.0.1:8080; port 0 picks a free port):

  /          a status page rendered on the server, without scripts: the
             lease table by the store's clock (name, state, holder, token,
             seq, remaining, acquired at), the fleet registry's agents
             (PostgreSQL), a timeline of holders and tokens since serve
             started, and the changes serve observed (in memory only)
  /metrics   Prometheus metrics: tenure_serve_store_up,
             tenure_serve_leases{state}, tenure_serve_lease_held{lease},
             tenure_serve_lease_token{lease} and more
  /healthz   200 "ok: …" when the last read of the store succeeded less
             than --healthy-within ago (default 10s, or three reads when
             --interval is longer), else 503 "unhealthy: …" with why

With NAME... it shows those leases only; without, every lease the store
knows. With --slots N it shows the N slots of each NAME (tenure run
--slots), the leases NAME#0 … NAME#N-1. The page has no authentication: bind it to loopback, or put it
behind a proxy that has.

Serve reads the store once before it listens, and fails as status does
when it cannot (69 unreachable, 78 not migrated). It stops on SIGINT or
SIGTERM.`,
		setup: func(fs *flag.FlagSet) action {
			var o serveOptions
			fs.StringVar(&o.addr, "http", "", "listen on `ADDR` (host:port) for HTTP")
			o.interval = durationFlag(fs, "interval", serve.DefaultInterval, "the `duration` between two reads of the store")
			o.healthyWithin = durationFlag(fs, "healthy-within", serve.DefaultHealthyWithin, "/healthz answers 503 when the last successful read is older than this `duration` (default 10s or 3×--interval, the longer)")
			fs.StringVar(&o.store, "store", "", storeUsage)
			fs.IntVar(&o.slots, "slots", 0, slotsUsage)
			return func(ctx context.Context, e *env, names []string) error {
				o.storeGiven = flagSet(fs, "store")
				names, err := slotNames("serve", names, o.slots)
				if err != nil {
					return err
				}
				if !flagSet(fs, "healthy-within") {
					*o.healthyWithin = max(*o.healthyWithin, 3**o.interval)
				}
				return o.run(ctx, e, names)
			}
		},
	}
}

type serveOptions struct {
	addr          string
	interval      *time.Duration
	healthyWithin *time.Duration
	store         string
	storeGiven    bool
	slots         int
}

// serveShutdown bounds how long serve waits for requests in flight when it
// stops.
const serveShutdown = 5 * time.Second

func (o *serveOptions) run(ctx context.Context, e *env, names []string) error {
	switch {
	case strings.TrimSpace(o.addr) == "":
		return usagef("serve", "--http ADDR is required, e.g. --http 127.0.0.1:8080")
	case *o.interval <= 0:
		return usagef("serve", "--interval must be positive")
	case *o.healthyWithin <= *o.interval:
		return usagef("serve", "--healthy-within (%s) must be greater than --interval (%s)", *o.healthyWithin, *o.interval)
	}
	if err := checkListenAddr("--http", o.addr); err != nil {
		return usagef("serve", "%v", err)
	}
	for _, n := range names {
		if err := store.ValidateName(n); err != nil {
			return usagef("serve", "%s", message(err))
		}
	}
	opened, err := e.openStore(ctx, "serve", o.storeGiven, o.store)
	if err != nil {
		return err
	}
	defer func() { _ = opened.Close() }() // Nothing is left to do about a failed close.
	if len(names) == 0 {
		if _, ok := opened.Store.(store.Lister); !ok {
			return usagef("serve", "this store cannot list its leases; name them")
		}
	}
	var reg *registry.Registry
	if opened.HasRegistry() {
		if reg, err = opened.Registry(); err != nil {
			return err
		}
	}
	srv, err := serve.New(serve.Config{
		Store:         opened.Store,
		Names:         names,
		Registry:      reg,
		StoreDisplay:  opened.Target.Display,
		Interval:      *o.interval,
		HealthyWithin: *o.healthyWithin,
		Hidden:        doctor.Hidden,
	})
	if err != nil {
		return err
	}
	if err := srv.Refresh(ctx); err != nil {
		return opened.Target.Wrap(err)
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("serve: cannot listen on %s: %w; choose another address or port", o.addr, err)
	}
	ctx, stop := signal.NotifyContext(ctx, forwarded...)
	defer stop()
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	runCtx, cancelRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = srv.Run(runCtx) // returns nil when runCtx ends
	}()
	e.errorf("serving the status of %s on http://%s/ (also /metrics and /healthz); stop with Ctrl-C", opened.Target.Display, ln.Addr())
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	cancelRun()
	<-ran
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serveShutdown)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close() // requests still in flight after the grace are cut
	}
	if serveErr == nil {
		serveErr = <-served
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve: serving HTTP on %s failed: %w", ln.Addr(), serveErr)
}
