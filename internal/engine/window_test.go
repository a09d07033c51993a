package engine

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestWindowCheck holds Check to its definition: suspended when the wall
// and monotonic clocks disagree about the time since the anchor by more
// than the tolerance, in either direction; otherwise expired from the
// deadline on.
func TestWindowCheck(t *testing.T) {
	anchor := Instant{Mono: 7 * time.Second, Wall: time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)}
	w := NewWindow(anchor, anchor.Mono+ttl-ttl/10)
	at := func(mono, wall time.Duration) Instant {
		return Instant{Mono: anchor.Mono + mono, Wall: anchor.Wall.Add(wall)}
	}
	for _, c := range []struct {
		name string
		now  Instant
		want Reason
	}{
		{"at the anchor", at(0, 0), 0},
		{"clocks agree", at(ttl/2, ttl/2), 0},
		{"wall ahead by the tolerance", at(time.Second, time.Second+tol), 0},
		{"wall behind by the tolerance", at(time.Second, time.Second-tol), 0},
		{"wall ahead beyond the tolerance", at(time.Second, time.Second+tol+1), ReasonSuspended},
		{"wall behind beyond the tolerance", at(time.Second, time.Second-tol-1), ReasonSuspended},
		{"just before the deadline", at(ttl-ttl/10-1, ttl-ttl/10-1), 0},
		{"at the deadline", at(ttl-ttl/10, ttl-ttl/10), ReasonExpiredLocally},
		{"suspended past the deadline", at(ttl, 2*ttl), ReasonSuspended},
	} {
		if got := w.Check(c.now, tol); got != c.want {
			t.Errorf("%s: Check = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWindowCheckMatchesItsDefinition compares Check with the rule written
// out, on random anchors and readings around them.
func TestWindowCheckMatchesItsDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	span := func(d time.Duration) time.Duration { return time.Duration(r.Int64N(int64(2*d))) - d }
	for range 100_000 {
		anchor := Instant{Mono: time.Duration(r.Int64N(int64(time.Hour))), Wall: base.Add(span(24 * time.Hour))}
		deadline := anchor.Mono + time.Duration(r.Int64N(int64(ttl)))
		now := Instant{Mono: anchor.Mono + time.Duration(r.Int64N(int64(2*ttl)))}
		now.Wall = anchor.Wall.Add(now.Mono - anchor.Mono + span(2*tol))
		skew := now.Wall.Sub(anchor.Wall) - (now.Mono - anchor.Mono)
		var want Reason
		switch {
		case skew > tol || skew < -tol:
			want = ReasonSuspended
		case now.Mono >= deadline:
			want = ReasonExpiredLocally
		}
		if got := NewWindow(anchor, deadline).Check(now, tol); got != want {
			t.Fatalf("anchor %+v, deadline %s, now %+v: Check = %v, want %v (skew %s)", anchor, deadline, now, got, want, skew)
		}
	}
}
