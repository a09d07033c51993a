package tenure_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/memstore"
)

// A follower watches who leads a name without campaigning for it, and
// reads the address the leader published with its tenure.
func ExampleClient_Observe() {
	st := memstore.New(memstore.Config{})
	defer st.Close()
	leader, _ := tenure.New(st, tenure.Config{Label: "leader", Payload: "10.0.0.7:8443"})
	follower, _ := tenure.New(st, tenure.Config{Label: "follower"})
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- leader.Run(ctx) }()
	defer func() { stop(); <-ran }()

	l, _ := leader.Acquire(ctx, "reconciler")
	seen := make(chan tenure.Observation)
	octx, ostop := context.WithCancel(ctx)
	observed := make(chan error, 1)
	go func() { observed <- follower.Observe(octx, "reconciler", func(o tenure.Observation) { seen <- o }) }()
	describe := func(o tenure.Observation) {
		if !o.Held {
			fmt.Println("nobody leads", o.Name)
			return
		}
		fmt.Println(o.Holder.Label, "leads", o.Name, "with token", o.Token, "at", o.Payload)
	}

	describe(<-seen)
	_ = l.Release(ctx) // announced by the store: seen at once
	describe(<-seen)
	ostop()
	fmt.Println("observe returned:", <-observed)
	// Output:
	// leader leads reconciler with token 1 at 10.0.0.7:8443
	// nobody leads reconciler
	// observe returned: <nil>
}

// A client logs through the slog logger in its Config, and nothing
// without one.
func ExampleConfig_logger() {
	st := memstore.New(memstore.Config{})
	defer st.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "holder" {
				return slog.Attr{} // they change from run to run
			}
			return a
		},
	}))
	client, _ := tenure.New(st, tenure.Config{Label: "billing-worker", Logger: logger})
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- client.Run(ctx) }()
	defer func() { stop(); <-ran }()

	l, _ := client.Acquire(ctx, "nightly-invoice-run")
	_ = l.Release(ctx)
	// Output:
	// level=INFO msg="lease acquired" store=memstore lease=nightly-invoice-run token=1
	// level=INFO msg="lease released" store=memstore lease=nightly-invoice-run token=1 reason=released
}
