package tenure_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/memstore"
)

// A nightly job runs under a lease; its writes carry the token, and a second
// worker is refused while the first holds it.
func Example() {
	st := memstore.New(memstore.Config{})
	defer st.Close()

	ctx, stop := context.WithCancel(context.Background())
	worker, _ := tenure.New(st, tenure.Config{Label: "billing-worker"})
	ran := make(chan error, 1)
	go func() { ran <- worker.Run(ctx) }()
	defer func() { stop(); <-ran }()

	err := worker.Do(ctx, "nightly-invoice-run", func(ctx context.Context, l *tenure.Lease) error {
		fmt.Println("charging with token", l.Token())

		other, _ := tenure.New(st, tenure.Config{Label: "second-worker"})
		octx, ostop := context.WithCancel(ctx)
		oran := make(chan error, 1)
		go func() { oran <- other.Run(octx) }()
		defer func() { ostop(); <-oran }()

		_, err := other.Acquire(ctx, "nightly-invoice-run")
		var held *tenure.HeldError
		if errors.As(err, &held) {
			fmt.Println("second worker refused; held by", held.Holder.Label, "with token", held.Token)
		}
		return nil
	})
	fmt.Println("done:", err)

	rec, _ := st.Get(ctx, "nightly-invoice-run")
	fmt.Println("after Do the lease is", rec.State)
	// Output:
	// charging with token 1
	// second worker refused; held by billing-worker with token 1
	// done: <nil>
	// after Do the lease is released
}
