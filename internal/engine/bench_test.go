package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// BenchmarkEventAmongHeld measures one lease's acquisition and release
// (four events) in an engine that already holds n leases: the cost of an
// event must not grow with the leases a process holds.
func BenchmarkEventAmongHeld(b *testing.B) {
	for _, n := range []int{10, 1_000, 100_000} {
		b.Run(fmt.Sprintf("Held%d", n), func(b *testing.B) {
			h := &harness{now: Instant{Mono: time.Hour, Wall: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}}
			h.e = New(Config{
				Label: "bench", TTL: ttl, RenewInterval: renew, SuspendTolerance: tol,
				NewInstance: func() string { return "id" },
				Jitter:      func(max time.Duration) time.Duration { return max / 2 },
			})
			for i := range n {
				name := fmt.Sprintf("held-%d", i)
				send := h.step(Want{Name: name, Campaign: true})[0].(SendAcquire)
				h.step(AcquireDone{Name: name, Holder: send.Holder, SentAt: send.SentAt,
					Grant: &store.Grant{Holder: send.Holder, Token: store.Token(i + 1), Seq: 1, Remaining: ttl}})
			}
			token := store.Token(n)
			b.ReportAllocs()
			for b.Loop() {
				token++
				send := h.step(Want{Name: "churn", Campaign: true})[0].(SendAcquire)
				h.step(AcquireDone{Name: "churn", Holder: send.Holder, SentAt: send.SentAt,
					Grant: &store.Grant{Holder: send.Holder, Token: token, Seq: 1, Remaining: ttl}})
				h.step(Release{Name: "churn", Holder: send.Holder, Token: token})
				h.step(ReleaseDone{Name: "churn", Token: token})
			}
		})
	}
}
