package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// FuzzEngine drives the engine with arbitrary event sequences (the input
// bytes pick each event and its outcome) and checks after every step that:
//
//   - unknown is no (P3): every tenure the engine reports held is within
//     its trust window, and no deadline exceeds the send time plus the
//     granted remaining time less the minimum margin;
//   - renewals are a chain (P6): a reply showing this holder and token with
//     a seq the engine did not produce ends the tenure as a seq mismatch,
//     regenerates the identity and releases nothing;
//   - one tenure per name at a time, one renewal batch in flight at a time,
//     at most one acquisition per name per step, and no tick asked for in
//     the past (nothing spins);
//   - the engine follows exactly the names it tracks, each before it
//     acquires, renews or checks it (a notice it would act on is never
//     filtered out).
func FuzzEngine(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	f.Add([]byte{0, 0, 3, 3, 3, 2, 2, 9, 1, 1, 1, 1, 4, 4})
	f.Add([]byte{0, 5, 0, 2, 6, 2, 7, 2, 8, 2, 10, 3, 11, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		fz := newFuzzer(t, in)
		for fz.more() {
			fz.step()
		}
	})
}

type heldTenure struct {
	holder  store.Holder
	token   store.Token
	seq     int64
	window  Window
	writes  int // chain writes granted and not ended
	waiting int // chain writes asked for and not granted
}

type fuzzer struct {
	t     *testing.T
	in    []byte
	pos   int
	now   Instant
	e     *Engine
	ids   int
	token store.Token

	held      map[string]*heldTenure
	acquires  []SendAcquire
	renew     *SendRenew
	releases  []SendRelease
	mismatch  map[string]store.Token // name → token expected to end as a seq mismatch
	followed  map[string]bool
	stepCount int
}

var fuzzNames = []string{"a", "b", "c"}

func newFuzzer(t *testing.T, in []byte) *fuzzer {
	fz := &fuzzer{t: t, in: in, now: Instant{Mono: time.Hour, Wall: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, held: map[string]*heldTenure{}, followed: map[string]bool{}}
	fz.e = New(Config{
		Label: "w", TTL: ttl, RenewInterval: renew, SuspendTolerance: tol, ProgressTimeout: 20 * time.Second,
		NewInstance: func() string { fz.ids++; return fmt.Sprint("id", fz.ids) },
		Jitter:      func(max time.Duration) time.Duration { return max / 3 },
	})
	return fz
}

func (fz *fuzzer) more() bool { return fz.pos < len(fz.in) }

func (fz *fuzzer) next() byte {
	if fz.pos >= len(fz.in) {
		return 0
	}
	b := fz.in[fz.pos]
	fz.pos++
	return b
}

func (fz *fuzzer) step() {
	b := fz.next()
	var ev Event
	switch b % 12 {
	case 0:
		ev = Want{Name: fuzzNames[int(fz.next())%len(fuzzNames)], Campaign: fz.next()%2 == 0}
	case 1: // time passes normally
		d := time.Duration(fz.next()) * 100 * time.Millisecond
		fz.now.Mono += d
		fz.now.Wall = fz.now.Wall.Add(d)
		due, ok := fz.e.Next()
		ev = Tick{Timer: ok && due <= fz.now.Mono, Due: due}
	case 2: // answer the oldest acquisition
		ev = fz.answerAcquire()
	case 3: // answer the renewal
		ev = fz.answerRenew()
	case 4: // answer a release
		if len(fz.releases) > 0 {
			r := fz.releases[0]
			fz.releases = fz.releases[1:]
			ev = ReleaseDone{Name: r.Name, Token: r.Token}
		}
	case 5:
		ev = Revoke{}
	case 6: // the wall clock jumps
		fz.now.Wall = fz.now.Wall.Add(time.Duration(int8(fz.next())) * time.Second)
		ev = Tick{}
	case 7:
		n := store.Notice{Name: fuzzNames[int(fz.next())%len(fuzzNames)], Kind: store.NoticeKind(fz.next() % 3)}
		switch n.Kind {
		case store.NoticeAcquired:
			n.Holder, n.Remaining = fz.someHolder(), time.Duration(fz.next())*100*time.Millisecond
		case store.NoticeReleased:
			n.Next = fz.someHolder()
		}
		ev = Notified{n}
	case 8:
		if h := fz.anyHeld(); h != "" {
			ev = Progress{Name: h, Token: fz.held[h].token, At: fz.now}
		}
	case 9:
		ev = Unwant{Name: fuzzNames[int(fz.next())%len(fuzzNames)]}
	case 10:
		if h := fz.anyHeld(); h != "" {
			ev = Release{Name: h, Token: fz.held[h].token}
		}
	case 11: // a chain write asks to begin, or one in flight ends
		if h := fz.anyHeld(); h != "" {
			ht := fz.held[h]
			if ht.writes == 0 || fz.next()%2 == 0 {
				ht.waiting++
				ev = ChainWriteBegin{Name: h, Token: ht.token}
			} else {
				ht.writes--
				end := ChainWriteEnd{Name: h, Token: ht.token}
				if fz.next()%2 == 0 {
					end.Seq = ht.seq + 1
					ht.seq = end.Seq // what the lease records after the commit
				}
				ev = end
			}
		}
	}
	if ev == nil {
		return
	}
	fz.apply(ev, fz.e.Step(fz.now, ev))
}

// someHolder is this engine's identity or another's, as the input says.
func (fz *fuzzer) someHolder() store.Holder {
	if fz.next()%2 == 0 {
		return fz.e.Holder()
	}
	return store.Holder{Label: "w", Instance: "other"}
}

func (fz *fuzzer) anyHeld() string {
	for _, n := range fuzzNames {
		if fz.held[n] != nil {
			return n
		}
	}
	return ""
}

func (fz *fuzzer) answerAcquire() Event {
	if len(fz.acquires) == 0 {
		return nil
	}
	a := fz.acquires[0]
	fz.acquires = fz.acquires[1:]
	d := AcquireDone{Name: a.Name, Holder: a.Holder, SentAt: a.SentAt}
	switch fz.next() % 4 {
	case 0, 1:
		fz.token++
		d.Grant = &store.Grant{Holder: a.Holder, Token: fz.token, Seq: 1, Remaining: ttl - time.Duration(fz.next())*10*time.Millisecond}
	case 2:
		d.Held = &store.HeldError{Holder: store.Holder{Label: "w", Instance: "other"}, Token: fz.token, Seq: 3,
			Remaining: time.Duration(fz.next()) * 100 * time.Millisecond, Position: int(fz.next() % 3)}
		if fz.next()%4 == 0 { // released and kept for the next in line
			d.Held.Holder, d.Held.Next = store.Holder{}, fz.someHolder()
		}
	case 3:
		d.Err = errStore
	}
	return d
}

func (fz *fuzzer) answerRenew() Event {
	if fz.renew == nil {
		return nil
	}
	r := *fz.renew
	fz.renew = nil
	d := RenewDone{SentAt: r.SentAt, Items: r.Items}
	if fz.next()%5 == 0 {
		d.Err = errStore
		return d
	}
	fz.mismatch = map[string]store.Token{}
	for _, it := range r.Items {
		o := store.RenewResult{Renewed: true, Grant: store.Grant{Holder: it.Holder, Token: it.Token, Seq: it.Seq + 1, Remaining: ttl}}
		switch fz.next() % 6 {
		case 0: // a clone renewed first
			o = store.RenewResult{Grant: store.Grant{Holder: it.Holder, Token: it.Token, Seq: it.Seq + 7, Remaining: ttl}}
			if h := fz.held[it.Name]; h != nil && h.token == it.Token {
				fz.mismatch[it.Name] = it.Token // still held: only a clone moves the chain now
			}
		case 1:
			o = store.RenewResult{Grant: store.Grant{Holder: store.Holder{Label: "w", Instance: "other"}, Token: it.Token + 1, Seq: 1, Remaining: ttl}}
		case 2:
			o = store.RenewResult{Grant: store.Grant{Token: it.Token}}
		}
		d.Results = append(d.Results, o)
	}
	return d
}

// apply records the actions and checks the invariants.
func (fz *fuzzer) apply(ev Event, acts []Action) {
	t := fz.t
	acquiresThisStep := map[string]int{}
	lost := map[string]Reason{}
	released := map[string]bool{}
	identity := false
	for _, a := range acts {
		fz.checkFollowed(a)
		switch a := a.(type) {
		case Follow:
			fz.followed[a.Name] = true
		case Unfollow:
			delete(fz.followed, a.Name)
		case SendAcquire:
			acquiresThisStep[a.Name]++
			if acquiresThisStep[a.Name] > 1 {
				t.Fatalf("two acquisitions of %q in one step", a.Name)
			}
			fz.acquires = append(fz.acquires, a)
		case SendRenew:
			if fz.renew != nil {
				t.Fatalf("a second renewal batch while one is in flight")
			}
			fz.renew = &a
			for _, it := range a.Items {
				if h := fz.held[it.Name]; h == nil || h.token != it.Token || h.seq != it.Seq {
					t.Fatalf("renewal of %+v, which is not the held tenure %+v", it, h)
				}
				if h := fz.held[it.Name]; h.writes > 0 {
					t.Fatalf("renewal of %q while %d chain writes are in flight", it.Name, h.writes)
				}
			}
		case ChainWriteGranted:
			h := fz.held[a.Name]
			if h == nil || h.token != a.Token || h.waiting == 0 || h.seq != a.Seq {
				t.Fatalf("chain write granted for %+v, tenure %+v", a, h)
			}
			if fz.renew != nil && slices.ContainsFunc(fz.renew.Items, func(it store.RenewParams) bool { return it.Name == a.Name && it.Token == a.Token }) {
				t.Fatalf("chain write granted for %q while its renewal is in flight", a.Name)
			}
			if h.writes > 0 {
				t.Fatalf("chain write granted for %q while another is in flight: both would present seq %d", a.Name, a.Seq)
			}
			h.writes++
			h.waiting--
		case SendRelease:
			fz.releases = append(fz.releases, a)
			released[a.Name] = true
		case Acquired:
			if fz.held[a.Name] != nil {
				t.Fatalf("second tenure of %q while %d is held", a.Name, fz.held[a.Name].token)
			}
			if a.Deadline > a.Anchor.Mono+ttl-ttl/10 {
				t.Fatalf("deadline %s beyond send time + TTL − margin", a.Deadline-a.Anchor.Mono)
			}
			fz.held[a.Name] = &heldTenure{holder: a.Holder, token: a.Token, seq: a.Seq, window: NewWindow(a.Anchor, a.Deadline)}
		case Renewed:
			h := fz.held[a.Name]
			if h == nil || h.token != a.Token {
				t.Fatalf("renewed a tenure that is not held: %+v", a)
			}
			if a.Deadline > a.Anchor.Mono+ttl-ttl/10 {
				t.Fatalf("deadline %s beyond send time + TTL − margin", a.Deadline-a.Anchor.Mono)
			}
			h.seq, h.window = a.Seq, NewWindow(a.Anchor, a.Deadline)
		case Lost:
			h := fz.held[a.Name]
			if h == nil || h.token != a.Token {
				t.Fatalf("lost a tenure that is not held: %+v", a)
			}
			delete(fz.held, a.Name)
			lost[a.Name] = a.Reason
		case IdentityChanged:
			identity = true
		}
	}
	if rd, ok := ev.(RenewDone); ok && rd.Err == nil {
		for name := range fz.mismatch {
			if lost[name] != ReasonSeqMismatch || !identity || released[name] {
				t.Fatalf("seq mismatch on %q: lost %v, identity changed %t, released %t", name, lost[name], identity, released[name])
			}
		}
	}
	for _, name := range fuzzNames {
		if fz.followed[name] != fz.e.Tracks(name) {
			t.Fatalf("%q followed %t, tracked %t", name, fz.followed[name], fz.e.Tracks(name))
		}
	}
	for name, h := range fz.held {
		if r := h.window.Check(fz.now, tol); r != 0 {
			t.Fatalf("tenure %q token %d still held outside its trust window (%v)", name, h.token, r)
		}
	}
	if due, ok := fz.e.Next(); ok && due < fz.now.Mono && len(acts) > 0 {
		if _, tick := ev.(Tick); !tick {
			return
		}
		t.Fatalf("engine asks for a tick %s in the past", fz.now.Mono-due)
	}
}

// checkFollowed fails when a is a store call about a name not followed.
func (fz *fuzzer) checkFollowed(a Action) {
	var names []string
	switch a := a.(type) {
	case SendAcquire:
		names = []string{a.Name}
	case SendCheck:
		names = []string{a.Name}
	case SendRenew:
		for _, it := range a.Items {
			names = append(names, it.Name)
		}
	}
	for _, name := range names {
		if !fz.followed[name] {
			fz.t.Fatalf("%T for %q, which is not followed", a, name)
		}
	}
}
