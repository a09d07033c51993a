package alwaysleader_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/store/alwaysleader"
)

// Two instances of an idempotent job both lead, with the same token.
func Example() {
	ctx := context.Background()
	s, err := alwaysleader.New("the cache warm-up only reads; running it on every instance is harmless")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println("running without a lease because:", s.Reason())

	for _, label := range []string{"web-1", "web-2"} {
		g, _ := s.Acquire(ctx, store.AcquireParams{
			Name:   "warm-cache",
			Holder: store.Holder{Label: label, Instance: "i1"},
			TTL:    time.Minute,
		})
		fmt.Println(g.Holder.Label, "leads with token", g.Token)
	}

	_, err = alwaysleader.New("  ")
	fmt.Println(err != nil)
	// Output:
	// running without a lease because: the cache warm-up only reads; running it on every instance is harmless
	// web-1 leads with token 1
	// web-2 leads with token 1
	// true
}
