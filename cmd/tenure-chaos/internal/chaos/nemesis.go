package chaos

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tenure-dev/tenure/internal/faultnet"
	"github.com/tenure-dev/tenure/internal/snapshot"
	"github.com/tenure-dev/tenure/store"
)

// Fault kinds.
const (
	faultPause     = "pause"      // SIGSTOP the holder for 0.5–5 × TTL (biased long), then SIGCONT
	faultKill      = "kill"       // SIGKILL the holder; its slot restarts
	faultCut       = "cut"        // close the holder's store connections
	faultBlackHole = "blackhole"  // partition the holder from its store for 0.5–3 × TTL
	faultDelay     = "delay"      // 50–400 ms latency on the holder's store connection for 1–3 × TTL
	faultLoseReply = "lose-reply" // the holder's store connections each lose their next reply, after the server carried out the request
	faultTerminate = "terminate"  // pg_terminate_backend of the holder's sessions
	faultRestart   = "restart"    // kill the store server and start it again with its data
	faultClock     = "clock"      // shift the holder's library wall clock by ±1–4 weeks
	faultClone     = "clone"      // start a second process with the holder's tenure (snapshot restored twice)
	faultFork      = "fork"       // the holder starts a child with its environment and files

	// Faults of one member of a clustered store, one member at a time.
	faultLeaderPause   = "leader-pause"   // SIGSTOP the cluster's leader for 1–3 × TTL, then SIGCONT
	faultLeaderKill    = "leader-kill"    // SIGKILL the cluster's leader; restart it with its data after 0.5–2 × TTL
	faultFollowerPause = "follower-pause" // SIGSTOP a follower for 1–3 × TTL, then SIGCONT
	faultFollowerKill  = "follower-kill"  // SIGKILL a follower; restart it with its data after 0.5–2 × TTL
)

// memberFaults are the faults of one member of a clustered store.
var memberFaults = []string{faultLeaderPause, faultLeaderKill, faultFollowerPause, faultFollowerKill}

// Targets of faults that hit the store rather than a worker: the store
// server, or a clustered store's leader (both may cost the holder its
// lease, so the takeovers after them count as cycles), or a follower
// (which should cost nothing).
const (
	targetStore    = "store"
	targetFollower = "store-follower"
)

// commonFaults are the faults every cell but a tenure run cell gets, each
// repeated by weight, before its own ([cellBackend.faults]).
var commonFaults = []string{faultPause, faultPause, faultPause, faultPause, faultPause, faultKill, faultKill, faultCut, faultBlackHole, faultBlackHole,
	faultDelay, faultLoseReply, faultLoseReply, faultClock, faultClock, faultFork}

// faultKinds returns the faults the backend of the name gets, each
// repeated by weight; none for a name that is no backend's.
func faultKinds(backend string) []string {
	b, err := backendNamed(backend)
	if err != nil {
		return nil
	}
	if b.run {
		return b.faults
	}
	return append(slices.Clip(commonFaults), b.faults...)
}

// draw is one round of the nemesis's schedule, drawn whole from the
// seeded source before anything is looked up, so that a seed replays the
// same schedule of kinds, times and parameters.
type draw struct {
	wait   time.Duration
	kind   string
	factor float64 // in [0, 1): scales the fault's duration within its range
	slot   int     // fallback target when nobody holds the lease
	sign   int64
	weeks  int64
	// phase delays the fault after the holder was looked up, so that it
	// lands at a random point of the holder's work loop rather than just
	// after a store round trip (the lookup's reply and the holder's own
	// arrive together).
	phase time.Duration
}

// Schedule returns the nemesis's first n rounds for a seed, for replay
// and tests.
func Schedule(seed uint64, backend string, every time.Duration, n int) []string {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	kinds := faultKinds(backend)
	var out []string
	for range n {
		d := nextDraw(rng, kinds, every, 5)
		out = append(out, fmt.Sprintf("+%s %s %.3f", d.wait.Round(time.Millisecond), d.kind, d.factor))
	}
	return out
}

func nextDraw(rng *rand.Rand, kinds []string, every time.Duration, slots int) draw {
	d := draw{
		wait:   every/2 + time.Duration(rng.Int64N(int64(every))),
		kind:   kinds[rng.IntN(len(kinds))],
		factor: rng.Float64(),
		slot:   1 + rng.IntN(slots),
		sign:   1,
		weeks:  1 + rng.Int64N(4),
		phase:  time.Duration(rng.Int64N(int64(20 * time.Millisecond))),
	}
	if rng.IntN(2) == 0 {
		d.sign = -1
	}
	return d
}

// nemesis injects one fault every FaultEvery (±50%) until ctx ends.
func (c *cell) nemesis(ctx context.Context) {
	rng := rand.New(rand.NewPCG(c.cfg.Seed, c.cfg.Seed^0x9e3779b97f4a7c15))
	kinds := faultKinds(c.cfg.Backend)
	for {
		d := nextDraw(rng, kinds, c.cfg.FaultEvery, c.cfg.Workers)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d.wait):
		}
		c.inject(ctx, d)
	}
}

// holder returns the current token and the process holding it, if known.
func (c *cell) holder(ctx context.Context) (int64, *procInfo) {
	gctx, cancel := context.WithTimeout(ctx, c.cfg.TTL)
	defer cancel()
	rec, err := c.store.Get(gctx, c.faultLease())
	if err != nil || rec.State != store.StateHeld {
		return 0, nil
	}
	tok := int64(rec.Token)
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.tokens[tok]; ok {
		return tok, c.procs[g]
	}
	return tok, nil
}

func (c *cell) mainOf(slot int) *procInfo {
	s := c.slots[slot-1]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.pid == s.cmd.Process.Pid && p.main {
			return p
		}
	}
	return nil
}

// inject carries out one drawn fault against the current holder (or, if
// nobody holds the lease, against the drawn slot's worker) and logs it.
func (c *cell) inject(ctx context.Context, d draw) {
	tok, p := c.holder(ctx)
	if slices.Contains(memberFaults, d.kind) {
		time.Sleep(d.phase)
		c.memberFault(ctx, d, tok)
		return
	}
	if d.kind == faultFailover {
		c.failover(ctx, d, tok)
		return
	}
	if p == nil {
		p = c.mainOf(d.slot)
	}
	if p == nil || c.isFrozen(p.slot) {
		return
	}
	time.Sleep(d.phase)
	ttl := c.cfg.TTL
	s := c.slots[p.slot-1]
	ev := Event{Kind: kindFault, Fault: d.kind, Target: p.gtid, Token: tok, Slot: p.slot}
	span := func(lo, hi float64) time.Duration { return time.Duration((lo + (hi-lo)*d.factor) * float64(ttl)) }
	switch d.kind {
	case faultPause:
		// Biased toward the long end, so that most pauses outlast the
		// store's expiry of the holder's lease (Consul's sessions live up
		// to twice their TTL) and a successor takes over meanwhile.
		dur := time.Duration((0.5 + 4.5*math.Sqrt(d.factor)) * float64(ttl))
		ev.Dur = int64(dur)
		c.hist.log(ev)
		p.signal(syscall.SIGSTOP)
		c.later(ctx, dur, func() {
			p.signal(syscall.SIGCONT)
			c.hist.log(Event{Kind: kindHeal, Fault: d.kind, Target: p.gtid, Slot: p.slot})
		})
	case faultKill:
		c.hist.log(ev)
		p.signal(syscall.SIGKILL)
		if p.main && !runCell(c.cfg.Backend) { // a tenure run's slot starts another when it exits
			c.later(ctx, span(0.1, 0.5), func() { _ = c.startMain(s) })
		}
	case faultCut:
		c.hist.log(ev)
		s.each((*faultnet.Proxy).Cut)
	case faultBlackHole:
		dur := span(0.5, 3)
		ev.Dur = int64(dur)
		c.hist.log(ev)
		s.each((*faultnet.Proxy).BlackHole)
		c.later(ctx, dur, func() {
			s.each((*faultnet.Proxy).Restore)
			c.hist.log(Event{Kind: kindHeal, Fault: d.kind, Slot: p.slot})
		})
	case faultDelay:
		dur := span(1, 3)
		ev.Dur = int64(dur)
		ev.Detail = (50*time.Millisecond + time.Duration(d.factor*float64(350*time.Millisecond))).String()
		c.hist.log(ev)
		delay := 50*time.Millisecond + time.Duration(d.factor*float64(350*time.Millisecond))
		s.each(func(px *faultnet.Proxy) { px.SetDelay(delay) })
		c.later(ctx, dur, func() {
			s.each(func(px *faultnet.Proxy) { px.SetDelay(0) })
			c.hist.log(Event{Kind: kindHeal, Fault: d.kind, Slot: p.slot})
		})
	case faultLoseReply:
		c.hist.log(ev)
		s.each((*faultnet.Proxy).LoseReplies)
	case faultTerminate:
		c.hist.log(ev)
		tctx, cancel := context.WithTimeout(ctx, ttl)
		defer cancel()
		_, _ = c.pgPool.Exec(tctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", s.app)
	case faultRestart:
		ev.Target = targetStore
		c.hist.log(ev)
		c.server.kill()
		c.later(ctx, span(0.1, 1), func() {
			if err := c.server.launch(context.WithoutCancel(ctx)); err != nil {
				c.hist.log(Event{Kind: kindHeal, Fault: d.kind, Detail: "restart failed: " + err.Error()})
				return
			}
			c.hist.log(Event{Kind: kindHeal, Fault: d.kind, Target: targetStore})
		})
	case faultClock:
		off := d.sign * d.weeks * int64(7*24*time.Hour)
		ev.Dur = off
		if !c.tell(s, p, "clock "+strconv.FormatInt(off, 10)) {
			return
		}
		c.hist.log(ev)
	case faultClone:
		c.clone(ctx, s, p, ev)
	case faultFork:
		if !c.tell(s, p, "fork") {
			return
		}
		c.hist.log(ev)
	case faultForce:
		if err := c.forceRelease(ctx); err != nil {
			ev.Detail = "tenure release --force failed: " + err.Error()
		}
		c.hist.log(ev)
	case faultFreeze:
		// The supervisors (tenure run and its watchdog) are stopped first
		// and resumed last: the machine's pause ends for the command 20–60
		// ms before they are scheduled again, so a write in flight goes
		// out first, as on a machine whose threads resume in any order.
		dur := span(1.5, 4)
		ev.Dur = int64(dur)
		c.setFrozen(p.slot, true)
		c.hist.log(ev)
		start := time.Now()
		command, supervisors := freeze(p)
		c.later(ctx, dur, func() {
			var gtids []string
			for _, q := range command {
				q.signal(syscall.SIGCONT)
				gtids = append(gtids, q.gtid)
			}
			time.Sleep(20*time.Millisecond + 2*d.phase)
			for i := len(supervisors) - 1; i >= 0; i-- {
				supervisors[i].signal(syscall.SIGCONT)
				gtids = append(gtids, supervisors[i].gtid)
			}
			c.hist.log(Event{Kind: kindHeal, Fault: d.kind, Target: p.gtid, Slot: p.slot, Dur: int64(time.Since(start)), Detail: strings.Join(gtids, " ")})
			c.setFrozen(p.slot, false)
		})
	}
}

// isFrozen reports whether slot's processes are frozen: no other fault
// strikes them until the freeze ends.
func (c *cell) isFrozen(slot int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frozen[slot]
}

func (c *cell) setFrozen(slot int, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen == nil {
		c.frozen = map[int]bool{}
	}
	c.frozen[slot] = on
}

// memberCalm is how long, in TTLs, the nemesis leaves a clustered
// store's members alone after a member's fault ended. A fault of the
// leader stalls every write for 4 to 8 s (RELIABILITY.md, "Clusters
// under fault"), and struck again as soon as it had recovered, a cluster
// spent two thirds of a cell stalled: the holders then wrote too seldom
// for the faults of the holders, which the unfenced twin shows, to land
// between a lease check and a write. Between the member faults the holder
// faults go on.
const memberCalm = 3

// memberFault pauses or kills the leader of a clustered store, or a
// follower, unless another member is paused or down already, or the
// cluster has not yet recovered from the last fault so that it could lose
// a member (a Consul server that comes back is a non-voter for a while),
// or no leader is agreed on, or the last member fault ended less than
// memberCalm TTLs ago: each fault is one member's, and the cluster keeps
// its quorum. tok is the token held when it strikes. After a leader
// fault it watches for the next leader ([cell.watchElection]).
func (c *cell) memberFault(ctx context.Context, d draw, tok int64) {
	c.mu.Lock()
	calm := time.Now().Before(c.storeCalm)
	c.mu.Unlock()
	if calm || !c.claimStore() {
		return
	}
	free := func() {
		c.mu.Lock()
		c.storeCalm = time.Now().Add(memberCalm * c.cfg.TTL)
		c.mu.Unlock()
		c.freeStore()
	}
	lctx, cancel := context.WithTimeout(ctx, c.cfg.TTL)
	err := c.server.healthy(lctx)
	leader := -1
	if err == nil {
		leader, err = c.server.leader(lctx)
	}
	cancel()
	if err != nil {
		c.freeStore()
		return
	}
	victim, target := leader, targetStore
	if d.kind == faultFollowerPause || d.kind == faultFollowerKill {
		victim, target = (leader+1+d.slot%2)%len(c.server.members), targetFollower
	}
	m := c.server.members[victim]
	ttl := c.cfg.TTL
	span := func(lo, hi float64) time.Duration { return time.Duration((lo + (hi-lo)*d.factor) * float64(ttl)) }
	member := fmt.Sprintf("member %d", victim+1)
	ev := Event{Kind: kindFault, Fault: d.kind, Target: target, Token: tok, Detail: member}
	switch d.kind {
	case faultLeaderPause, faultFollowerPause:
		dur := span(1, 3)
		ev.Dur = int64(dur)
		c.hist.log(ev)
		m.Pause()
		c.later(ctx, dur, func() {
			m.Resume()
			c.hist.log(Event{Kind: kindHeal, Fault: d.kind, Target: target, Detail: member})
			free()
		})
	case faultLeaderKill, faultFollowerKill:
		dur := span(0.5, 2)
		ev.Dur = int64(dur)
		c.hist.log(ev)
		m.Kill()
		c.later(ctx, dur, func() {
			defer free()
			start := time.Now()
			if err := m.Restart(context.WithoutCancel(ctx)); err != nil {
				c.hist.log(Event{Kind: kindHeal, Fault: d.kind, Target: target, Detail: member + ": restart failed: " + err.Error()})
				return
			}
			c.hist.log(Event{Kind: kindHeal, Fault: d.kind, Target: target, Dur: int64(time.Since(start)), Detail: member + " restarted"})
		})
	}
	if target == targetStore {
		c.watchElection(ctx, leader, ev.Detail)
	}
}

// claimStore marks a fault of the store's servers as under way, unless
// one is already: the nemesis strikes the store's servers one fault at a
// time. It reports whether the caller may strike; [cell.freeStore] ends
// the fault.
func (c *cell) claimStore() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.storeFault {
		return false
	}
	c.storeFault = true
	return true
}

func (c *cell) freeStore() {
	c.mu.Lock()
	c.storeFault = false
	c.mu.Unlock()
}

// watchElection asks the cluster for its leader until it agrees on one
// other than old, then logs it with the time since the fault on member
// (Dur), the election's length as the harness sees it (within
// testserver's leader probe timeout). It gives up when ctx ends.
func (c *cell) watchElection(ctx context.Context, old int, member string) {
	start := time.Now()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for ctx.Err() == nil {
			i, err := c.server.leader(ctx)
			if err == nil && i != old {
				c.hist.log(Event{Kind: kindLeader, Target: targetStore, Dur: int64(time.Since(start)),
					Detail: fmt.Sprintf("member %d after the fault on %s", i+1, member)})
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
}

// tell sends a control command to p, which must be its slot's main
// worker (children have no control channel).
func (c *cell) tell(s *slot, p *procInfo, cmd string) bool {
	if !p.main {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stdin == nil {
		return false
	}
	_, err := fmt.Fprintln(s.stdin, cmd)
	return err == nil
}

// clone asks the holder for a snapshot of its tenure and starts a second
// process that adopts it.
func (c *cell) clone(ctx context.Context, s *slot, p *procInfo, ev Event) {
	select {
	case <-s.replies:
	default:
	}
	if !c.tell(s, p, "snapshot") {
		return
	}
	var reply string
	select {
	case reply = <-s.replies:
	case <-time.After(c.cfg.TTL / 2):
		return
	case <-ctx.Done():
		return
	}
	counter, state, ok := strings.Cut(reply, " ")
	if !ok {
		return
	}
	if b, err := base64.StdEncoding.DecodeString(state); err == nil {
		var st snapshot.Tenure
		if json.Unmarshal(b, &st) == nil {
			ev.Token = int64(st.Token)
		}
	}
	c.hist.log(ev)
	_, _, _ = c.launch(s, false, "-adopt", state, "-parent", p.gtid, "-ctr", counter, "-life", (3 * c.cfg.TTL).String())
}

// later runs fn after d, or at once when ctx ends; the cell waits for it.
func (c *cell) later(ctx context.Context, d time.Duration, fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		fn()
	}()
}
