package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/store/memstore"
)

func Example() {
	ctx := context.Background()
	s := memstore.New(memstore.Config{})
	defer s.Close()

	alice := store.Holder{Label: "alice", Instance: "a1"}
	bob := store.Holder{Label: "bob", Instance: "b1"}

	g, _ := s.Acquire(ctx, store.AcquireParams{Name: "nightly-billing", Holder: alice, TTL: time.Minute})
	fmt.Println("alice holds it with token", g.Token)

	_, err := s.Acquire(ctx, store.AcquireParams{Name: "nightly-billing", Holder: bob, TTL: time.Minute})
	if held, ok := errors.AsType[*store.HeldError](err); ok {
		fmt.Println("bob is told it is held by", held.Holder)
	}

	_ = s.Release(ctx, store.ReleaseParams{Name: "nightly-billing", Holder: alice, Token: g.Token})
	g, _ = s.Acquire(ctx, store.AcquireParams{Name: "nightly-billing", Holder: bob, TTL: time.Minute})
	fmt.Println("bob holds it with token", g.Token)
	// Output:
	// alice holds it with token 1
	// bob is told it is held by alice/a1
	// bob holds it with token 2
}
