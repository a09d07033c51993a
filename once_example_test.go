package tenure_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/memstore"
)

// A nightly job runs at most once per day's window, whichever worker fires
// first; a late tick of another worker learns who ran it.
func ExampleClient_Once() {
	st := memstore.New(memstore.Config{})
	defer st.Close()
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 2)
	defer func() { stop(); <-ran; <-ran }()
	start := func(label string) *tenure.Client {
		c, _ := tenure.New(st, tenure.Config{Label: label})
		go func() { ran <- c.Run(ctx) }()
		return c
	}
	first, late := start("web-1"), start("web-2")
	day := tenure.OnceWindow{Key: "2026-12-04"}
	job := func(_ context.Context, l *tenure.Lease) error {
		fmt.Println("billing with token", l.Token())
		return nil
	}

	fmt.Println("web-1:", first.Once(ctx, "nightly-billing", day, job))
	err := late.Once(ctx, "nightly-billing", day, job)
	var done *tenure.WindowDoneError
	if errors.As(err, &done) {
		fmt.Println("web-2: already ran by", done.Window.Holder.Label, "with token", done.Window.Token)
	}
	// Output:
	// billing with token 1
	// web-1: <nil>
	// web-2: already ran by web-1 with token 1
}
