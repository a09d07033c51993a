// Command demo is `tenure demo` in a program of its own: the same stories,
// played by the same package, with the same flags and exit codes, linked
// with the embedded SQLite store alone.
//
// It exists for a newcomer's first minute. The tenure command links every
// backend's client (PostgreSQL, Redis, etcd, Consul, NATS, Kubernetes, S3),
// so `go run ./cmd/tenure demo` on empty Go caches first compiles some 620
// packages; `go run ./cmd/tenure/demo` compiles the SQLite driver and
// tenure, and plays the story in about half the time. Installed, `tenure
// demo` is the same demo.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/demo"
)

// worker is the argument this program runs the demo's workers with: it
// starts itself again as each worker.
const worker = "demo-worker"

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if len(os.Args) > 1 && os.Args[1] == worker {
		go func() { <-sigs; cancel() }()
		os.Exit(demo.Worker(ctx, os.Args[2:], os.Stdout, os.Stderr))
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "tenure: demo: cannot find the demo's own executable to start the workers with: %v\n", err)
		os.Exit(1)
	}
	// A signal ends the demo's context, so that it stops its workers and
	// removes its files, and the demo exits as tenure demo does: 128+N.
	received := make(chan syscall.Signal, 1)
	go func() {
		s := (<-sigs).(syscall.Signal)
		received <- s
		cancel()
	}()
	code := demo.Main(ctx, os.Args[1:], []string{exe, worker}, os.Stdout, os.Stderr)
	select {
	case s := <-received:
		code = 128 + int(s)
	default:
	}
	os.Exit(code)
}
