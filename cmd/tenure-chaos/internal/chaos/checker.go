package chaos

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Row is one write as the resource holds it: its position in the
// resource's read-modify-write chain, the token it carried, the ground
// truth of the process that made it, and its write id.
type Row struct {
	N      int64
	Token  int64
	Writer string
	WID    string
}

// Invariant names, as counted in [Violations].
const (
	invStale     = "stale acceptance"
	invWriters   = "two writers for one token"
	invGrow      = "token did not grow across a holder change"
	invReused    = "token granted twice"
	invLost      = "acknowledged write lost"
	maxExamples  = 20
	cycleHorizon = 20 // a takeover counts for a fault if it comes within this many TTLs
)

// Violations counts broken invariants by name and keeps a few examples.
type Violations struct {
	Count    map[string]int
	Examples []string
}

func (v *Violations) add(inv, format string, args ...any) {
	if v.Count == nil {
		v.Count = make(map[string]int)
	}
	v.Count[inv]++
	if len(v.Examples) < maxExamples {
		v.Examples = append(v.Examples, inv+": "+fmt.Sprintf(format, args...))
	}
}

// Total returns the number of violations.
func (v Violations) Total() int {
	n := 0
	for _, c := range v.Count {
		n += c
	}
	return n
}

// Verdict is what the checker found in one run.
type Verdict struct {
	Fenced Violations // must be empty
	Twin   Violations // the negative control: must not be empty
	// Cycles counts "fault → lease lost → new holder" sequences.
	Cycles int
	// Takeovers holds, per cycle, the time from the fault to the new
	// holder's first acknowledged fenced write.
	Takeovers []time.Duration
	Faults    map[string]int
	// Writes counts fenced and twin write outcomes by result.
	Writes map[string]map[string]int
	Grants int
	Clones int
	// Members holds, per fault of a clustered store's member, what it
	// did to the lease held when it struck.
	Members []MemberFault `json:",omitempty"`
	// Overlaps is the postgres-run cell's supervision check: writes of a
	// tenure's command after a later tenure's began ([overlaps]).
	Overlaps Violations `json:",omitzero"`
	// Forced holds the postgres-run cell's writers that wrote on, within
	// a TTL, after tenure release --force ended their tenure and the next
	// one began ([overlaps]). A forced release keeps the lease's expiry
	// and moves the holder's chain on, so the next tenure begins only
	// after the holder stood down: any is a failure, told apart from
	// supervision's.
	Forced Violations `json:",omitzero"`
	// Excused counts the postgres-run cell's late writes that a freeze of
	// the writer (a machine pause) explains.
	Excused int `json:",omitempty"`
	// Failovers holds, per failover of the postgres-failover cell's
	// primary, what it lost.
	Failovers []FailoverOutcome `json:",omitempty"`
}

// FailoverOutcome is what one failover of a PostgreSQL primary did.
type FailoverOutcome struct {
	// Lag is how long the primary went on alone before it died.
	Lag time.Duration
	// LostGrants counts the tokens handed out meanwhile (to the cell's
	// workers and on the harness's other leases): the promoted standby
	// never saw them.
	LostGrants int
	// Outage is from the primary's death to the promoted standby's
	// taking connections (0: the failover failed).
	Outage time.Duration
	// Detail is the harness's account: the promoted server and the
	// token floor.
	Detail string
}

// MemberFault is what a fault of one member of a clustered store did to
// the lease held when it struck.
type MemberFault struct {
	Fault string
	// Token is the token held when the fault struck (0: none known).
	Token int64
	// Election is the time from a fault on the leader to the cluster's
	// agreeing on another (0: none seen, or a follower's fault).
	Election time.Duration
	// Stall is the time from the fault to the acknowledgement of the
	// first fenced write begun after it (0: none came): writes in flight
	// when it struck do not count.
	Stall time.Duration
	// Kept says that write carried Token: the holder's tenure outlived
	// the fault.
	Kept bool
	// Takeover is the time from the fault to the grant of the token the
	// next write carried, when the holder did not keep its tenure.
	Takeover time.Duration
}

// lineage records, for each clone, the process it was cloned from and the
// parent's write counter when its state was taken: the parent's writes
// with a lower counter happened before the split and are the clone's own
// history too.
type lineage map[string]split

type split struct {
	parent  string
	counter int64
}

// inherited reports whether o's writes up to counter last belong to p's
// own history: o is an ancestor of p and wrote only before p's line
// branched off it.
func (l lineage) inherited(p, o string, last int64) bool {
	for a := p; ; {
		s, ok := l[a]
		if !ok {
			return false
		}
		if s.parent == o {
			return last < s.counter
		}
		a = s.parent
	}
}

func (l lineage) related(a, b string) bool {
	return l.ancestor(a, b) || l.ancestor(b, a)
}

func (l lineage) ancestor(p, o string) bool {
	for a := p; ; {
		s, ok := l[a]
		if !ok {
			return false
		}
		if s.parent == o {
			return true
		}
		a = s.parent
	}
}

// check runs every invariant over one run's history and the two
// resources' final contents.
func check(events []Event, fenced, twin []Row, ttl time.Duration) Verdict {
	v := Verdict{Faults: make(map[string]int), Writes: map[string]map[string]int{resFenced: {}, resTwin: {}, resBegin: {}}}
	lin := lineage{}
	acked := map[string]map[string]int64{resFenced: {}, resTwin: {}, resBegin: {}}
	granted := map[int64]int{}
	for _, e := range events {
		switch e.Kind {
		case kindStart:
			if e.Detail == "clone" {
				lin[e.Proc] = split{parent: e.Parent, counter: e.Counter}
				v.Clones++
			}
		case kindAcquired:
			granted[e.Token]++
			v.Grants++
		case kindOther:
			granted[e.Token]++
		case kindDone:
			v.Writes[e.Res][e.Result]++
			if e.Result == resultOK {
				acked[e.Res][e.WID] = e.Token
			}
		case kindFault:
			v.Faults[e.Fault]++
		}
	}
	for tok, n := range granted {
		if n > 1 {
			v.Fenced.add(invReused, "token %d was granted %d times", tok, n)
		}
	}
	checkRows(&v.Fenced, fenced, lin, acked[resFenced])
	checkRows(&v.Twin, twin, lin, acked[resTwin])
	v.Cycles, v.Takeovers = cycles(byTime(events), ttl)
	v.Members = memberOutcomes(byTime(events))
	v.Failovers = failoverOutcomes(byTime(events))
	return v
}

// failoverOutcomes follows each failover (events in time order): the
// grants logged while the primary went on alone, and the heal that
// reports the promotion.
func failoverOutcomes(events []Event) []FailoverOutcome {
	var out []FailoverOutcome
	for i, f := range events {
		if f.Kind != kindFault || f.Fault != faultFailover {
			continue
		}
		o := FailoverOutcome{Lag: time.Duration(f.Dur)}
		for _, e := range events[i+1:] {
			if (e.Kind == kindAcquired || e.Kind == kindOther) && e.T <= f.T+f.Dur {
				o.LostGrants++
			}
			if e.Kind == kindHeal && e.Fault == faultFailover {
				o.Outage, o.Detail = time.Duration(e.Dur), e.Detail
				break
			}
		}
		out = append(out, o)
	}
	return out
}

// memberOutcomes follows each fault of a clustered store's member (events
// in time order) to the cluster's next leader, the first acknowledged
// fenced write begun after it and, when that write carried another token,
// its grant.
func memberOutcomes(events []Event) []MemberFault {
	var out []MemberFault
	for i, f := range events {
		if f.Kind != kindFault || !slices.Contains(memberFaults, f.Fault) {
			continue
		}
		m := MemberFault{Fault: f.Fault, Token: f.Token}
		// A fault on the leader is followed by an election, until the
		// next member fault.
		electing := f.Target == targetStore
		granted := map[int64]int64{}
		tried := map[string]bool{} // fenced writes begun after the fault
		for _, e := range events[i+1:] {
			switch {
			case e.Kind == kindTry && e.Res == resFenced:
				tried[e.WID] = true
			case e.Kind == kindFault && slices.Contains(memberFaults, e.Fault):
				electing = false
			case e.Kind == kindLeader && electing:
				m.Election, electing = time.Duration(e.T-f.T), false
			case e.Kind == kindAcquired:
				granted[e.Token] = e.T
			case e.Kind == kindDone && e.Res == resFenced && e.Result == resultOK && m.Stall == 0 && tried[e.WID]:
				m.Stall = time.Duration(e.T - f.T)
				m.Kept = f.Token != 0 && e.Token == f.Token
				if t, ok := granted[e.Token]; ok && !m.Kept {
					m.Takeover = time.Duration(t - f.T)
				}
			}
			if m.Stall != 0 && !electing {
				break
			}
		}
		out = append(out, m)
	}
	return out
}

// checkRows checks one resource: no stale acceptance, one writer per
// token, tokens growing across holder changes, and every acknowledged
// write present.
func checkRows(v *Violations, rows []Row, lin lineage, acked map[string]int64) {
	rows = append([]Row(nil), rows...)
	sort.Slice(rows, func(i, j int) bool { return rows[i].N < rows[j].N })
	var highest int64
	last := map[int64]map[string]int64{} // token → writer → highest counter
	present := make(map[string]int64, len(rows))
	for i, r := range rows {
		present[r.WID] = r.Token
		if r.Token < highest {
			v.add(invStale, "write %d (%s) with token %d accepted after token %d", r.N, r.WID, r.Token, highest)
		}
		highest = max(highest, r.Token)
		w, c := splitWID(r.WID)
		if last[r.Token] == nil {
			last[r.Token] = map[string]int64{}
		}
		last[r.Token][w] = max(last[r.Token][w], c)
		if i > 0 {
			p := rows[i-1]
			pw, _ := splitWID(p.WID)
			if pw != w && !lin.related(pw, w) && r.Token <= p.Token {
				v.add(invGrow, "write %d by %s has token %d after write %d by %s with token %d", r.N, w, r.Token, p.N, pw, p.Token)
			}
		}
	}
	toks := make([]int64, 0, len(last))
	for t := range last {
		toks = append(toks, t)
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i] < toks[j] })
	for _, t := range toks {
		ws := last[t]
		if len(ws) < 2 {
			continue
		}
		var live []string
		for o, oc := range ws {
			superseded := false
			for p := range ws {
				if p != o && lin.inherited(p, o, oc) {
					superseded = true
					break
				}
			}
			if !superseded {
				live = append(live, o)
			}
		}
		if len(live) > 1 {
			sort.Strings(live)
			v.add(invWriters, "token %d accepted from %d processes: %v", t, len(live), live)
		}
	}
	wids := make([]string, 0, len(acked))
	for wid := range acked {
		wids = append(wids, wid)
	}
	sort.Strings(wids)
	for _, wid := range wids {
		if tok, ok := present[wid]; !ok || tok != acked[wid] {
			v.add(invLost, "write %s with token %d was acknowledged but is not in the resource", wid, acked[wid])
		}
	}
}

// cycles counts "fault → lease lost → new holder" sequences: a grant of a
// new token whose predecessor's holder was the target of a fault (or the
// whole store was) after the predecessor's grant, within cycleHorizon
// TTLs. It returns, per cycle, the time from that fault to the first
// acknowledged fenced write with the new token (or to the grant, if none).
func cycles(events []Event, ttl time.Duration) (int, []time.Duration) {
	type grant struct {
		t   int64
		tok int64
	}
	var grants []grant
	var faults []Event
	firstWrite := map[int64]int64{}
	for _, e := range events {
		switch e.Kind {
		case kindAcquired:
			grants = append(grants, grant{e.T, e.Token})
		case kindFault:
			faults = append(faults, e)
		case kindDone:
			if e.Res == resFenced && e.Result == resultOK {
				if _, ok := firstWrite[e.Token]; !ok {
					firstWrite[e.Token] = e.T
				}
			}
		}
	}
	n := 0
	var lat []time.Duration
	horizon := int64(cycleHorizon * ttl)
	for i := 1; i < len(grants); i++ {
		prev, cur := grants[i-1], grants[i]
		if cur.tok <= prev.tok {
			continue
		}
		for _, f := range faults {
			if f.T <= prev.t || f.T > cur.t || cur.t-f.T > horizon {
				continue
			}
			if f.Token != prev.tok && f.Target != targetStore {
				continue
			}
			n++
			end := cur.t
			if w, ok := firstWrite[cur.tok]; ok {
				end = w
			}
			lat = append(lat, time.Duration(end-f.T))
			break
		}
	}
	return n, lat
}

// percentile returns the p-th percentile (0–100) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}
