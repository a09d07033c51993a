package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// report is everything one run measured; the JSON file is this struct.
type report struct {
	RunID    string            `json:"run_id"`
	Started  time.Time         `json:"started"`
	Finished time.Time         `json:"finished"`
	Command  string            `json:"command"`
	Tenure   string            `json:"tenure"` // the commit measured
	Host     map[string]string `json:"host"`
	Quick    bool              `json:"quick"`
	Params   map[string]any    `json:"params"`
	// Floors: store, then "read", "write", "read paced", "write paced".
	Floors    map[string]map[string]*dist `json:"floors"`
	FloorDesc map[string]string           `json:"floor_desc"`
	Subjects  []*subject                  `json:"subjects"`
	Scale     []*scaleResult              `json:"scale,omitempty"`
	Token     *tokenResult                `json:"token,omitempty"`
	Notes     []string                    `json:"notes,omitempty"`
}

// floor returns the p50 of a store's floor of the given kind, 0 if none.
func (r *report) floor(store, kind string) time.Duration {
	if d := r.Floors[store][kind]; d != nil {
		return d.P50
	}
	return 0
}

// noisy reports whether the machine's one-minute load average exceeded its
// CPU count at the start or the end of the run.
func (r *report) noisy() bool {
	cpus, err := strconv.ParseFloat(r.Host["cpus"], 64)
	if err != nil {
		return false
	}
	for _, k := range []string{"loadavg_start", "loadavg_end"} {
		f := strings.Fields(r.Host[k])
		if len(f) == 0 {
			continue
		}
		if l, err := strconv.ParseFloat(f[0], 64); err == nil && l > cpus {
			return true
		}
	}
	return false
}

// ratio prints d and its ratio to the floor f.
func ratio(d, f time.Duration) string {
	if f <= 0 {
		return fmtDur(d)
	}
	return fmt.Sprintf("%s (%.2f×)", fmtDur(d), float64(d)/float64(f))
}

// markdown renders the report; svgName is the picture's file name, next to
// the markdown file.
func (r *report) markdown(svgName string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# tenure performance: results of one run\n\n")
	p("Written by the benchmark program in `bench/` (see [PERFORMANCE.md](PERFORMANCE.md)); do not edit by hand.\n\n")
	p("- run `%s`, %s to %s (%s)\n", r.RunID, r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Finished.UTC().Format("15:04 UTC"), r.Finished.Sub(r.Started).Round(time.Second))
	p("- tenure %s\n", r.Tenure)
	p("- command: `%s`\n", r.Command)
	p("- host: %s, %s CPUs, %s; load average at start %s, at end %s\n", r.Host["cpu"], r.Host["cpus"], r.Host["go"], r.Host["loadavg_start"], r.Host["loadavg_end"])
	if r.noisy() {
		p("- **noisy**: the load average exceeded the number of CPUs; other work shared the machine, so compare ratios only and run again on a quiet machine before publishing\n")
	}
	if r.Quick {
		p("- **quick mode**: tiny sample sizes, for checking that the program works; these numbers mean nothing\n")
	}
	for _, n := range r.Notes {
		p("- %s\n", n)
	}
	p("\n## Floors\n\nEach store's cheapest read and write on a connection of its own, p50; *hot* back to back, *paced* after a %s idle gap (what every latency below is compared with).\n\n", r.Params["hold"])
	p("| store | read, hot | write, hot | read, paced | write, paced | operations (read, write) |\n|---|---|---|---|---|---|\n")
	for _, st := range sortedKeys(r.Floors) {
		p("| %s | %s | %s | %s | %s | %s |\n", st, fmtDur(r.floor(st, "read")), fmtDur(r.floor(st, "write")),
			fmtDur(r.floor(st, "read paced")), fmtDur(r.floor(st, "write paced")), r.FloorDesc[st])
	}
	p("\n## Latency\n\np50 unless stated; (n×) is the ratio to the same store's paced write floor. Acquire and release after a %s idle gap; *req* is the store requests of one acquire and release, counted on the wire. *Over the store* is what tenure's client adds to the store's own acquire and release calls, made alike right after (p50 minus p50). Handover: from A's release call to B (waiting) holding. Failover: from the crashed holder's last renewal to B holding.\n\n", r.Params["hold"])
	p("| subject | store | TTL | acquire | release | over the store | req | renew | handover p50 / p99 | failover p50 / max |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Subjects {
		res, wf := s.Result, r.floor(s.Store, "write paced")
		cell := func(d *dist) string {
			if d == nil {
				return "–"
			}
			return ratio(d.P50, wf)
		}
		ho, fo := "–", "–"
		if d := res.Handover; d != nil {
			ho = fmt.Sprintf("%s / %s (%.1f×)", fmtDur(d.P50), fmtDur(d.P99), float64(d.P50)/math.Max(1, float64(wf)))
		}
		if d := res.Failover; d != nil {
			fo = fmt.Sprintf("%s / %s", fmtDur(d.P50), fmtDur(d.Max))
		}
		over := "–"
		if res.Acquire != nil && res.StoreAcquire != nil && res.Release != nil && res.StoreRelease != nil {
			over = fmt.Sprintf("%s / %s", signedDur(res.Acquire.P50-res.StoreAcquire.P50), signedDur(res.Release.P50-res.StoreRelease.P50))
		}
		req := "–"
		if res.ReqPerCycle > 0 {
			req = fmt.Sprintf("%.1f", res.ReqPerCycle)
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Name, s.Store, fmtDur(s.TTL), cell(res.Acquire), cell(res.Release), over, req, cell(res.Renew), ho, fo)
	}
	r.slotsTable(&b)
	p("\n## Idle load and churn\n\nIdle load: store requests per second, counted on the wire, of one participant holding 1 lease or %v leases and doing nothing else. Churn: clients looping acquire and release on one name; acquisitions per second and Jain's fairness index (1: every client got the same share; 1/n: one got all).\n\n", r.Params["many"])
	var churnCols []int
	for _, s := range r.Subjects {
		for _, c := range s.Result.Churn {
			if !containsInt(churnCols, c.Clients) {
				churnCols = append(churnCols, c.Clients)
			}
		}
	}
	p("| subject | store | TTL | idle req/s, 1 lease | idle req/s, many | acquire all (many) |")
	for _, n := range churnCols {
		p(" churn %d clients: acq/s (Jain) |", n)
	}
	p("\n|---|---|---|---|---|---|%s\n", strings.Repeat("---|", len(churnCols)))
	for _, s := range r.Subjects {
		one, many, all := "–", "–", "–"
		for _, l := range s.Result.Load {
			if l.Leases == 1 {
				one = fmt.Sprintf("%.2f", l.ReqPerSec)
			} else {
				many, all = fmt.Sprintf("%.2f (%d leases)", l.ReqPerSec, l.Leases), fmtDur(l.AcquireAll)
			}
		}
		p("| %s | %s | %s | %s | %s | %s |", s.Name, s.Store, fmtDur(s.TTL), one, many, all)
		for _, n := range churnCols {
			cell := " – |"
			for _, c := range s.Result.Churn {
				if c.Clients == n {
					cell = fmt.Sprintf(" %.0f (%.2f) |", c.PerSec, c.Jain)
				}
			}
			p("%s", cell)
		}
		p("\n")
	}
	if len(r.Scale) > 0 {
		p("\n## Scale: tenure clients holding many leases on PostgreSQL\n\n")
		p("A row's clients share one store (one connection pool, one listener). A renew round is one client's, from its first `Store.Renew` call to the end of its last. Rows updated, HOT share and dead rows come from PostgreSQL's statistics of the lease table over the window (updated a few seconds late); CPU is over the same window, the server's (every postgres process on this machine) and the client process's, per lease-second held and in cores; heap is the client process's growth per lease held.\n\n")
		p("| leases | clients | acquired | acquire all | TTL | renew round p50 / p99 (rounds) | rows updated/s | HOT | dead rows | server CPU per lease-s (cores) | client CPU per lease-s (cores) | heap per lease | shutdown (releases all) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, sc := range r.Scale {
			round := "–"
			if d := sc.RenewRound; d != nil {
				round = fmt.Sprintf("%s / %s (%d)", fmtDur(d.P50), fmtDur(d.P99), d.N)
			}
			srv := "–"
			if sc.ServerCores > 0 {
				srv = fmt.Sprintf("%.2f µs (%.2f)", sc.ServerCPUPerLeaseSec, sc.ServerCores)
			}
			p("| %d | %d | %d | %s | %s | %s | %.0f | %.0f%% | %d | %s | %.2f µs (%.2f) | %.0f B | %s |\n", sc.Leases, sc.Clients, sc.Acquired, fmtDur(sc.AcquireAll), fmtDur(sc.TTL), round,
				sc.RowsUpdatedPerSec, 100*sc.HOTShare, sc.DeadRows, srv, sc.ClientCPUPerLeaseSec, sc.ClientCores, sc.HeapPerLease, fmtDur(sc.Shutdown))
		}
		for _, sc := range r.Scale {
			for _, e := range sc.Errors {
				p("\n- error (%d clients): %s\n", sc.Clients, e)
			}
		}
	}
	if tk := r.Token; tk != nil {
		p("\n## Token\n\n`Lease.Token()`, the check every fenced write makes, beside one `time.Now()`, which it cannot skip; per call, the median of %d alternating rounds of `testing.Benchmark`.\n\n", tk.Trials)
		p("| Token() | time.Now() | Token() over the clock | allocations per Token() |\n|---|---|---|---|\n")
		p("| %.1f ns | %.1f ns | %+.1f ns | %d |\n", tk.TokenNs, tk.NowNs, tk.TokenNs-tk.NowNs, tk.TokenAllocs)
	}
	if svgName != "" {
		p("\n## Handover and failover, every trial\n\n![handover and failover distributions](%s)\n", svgName)
	}
	p("\n## Settings and errors\n\n")
	for _, s := range r.Subjects {
		p("- **%s/%s, TTL %s**: %s", s.Name, s.Store, fmtDur(s.TTL), s.Settings)
		if len(s.Result.Errors) > 0 {
			p(". Errors (%d): %s", len(s.Result.Errors), strings.Join(s.Result.Errors, "; "))
		}
		p("\n")
	}
	return b.String()
}

// signedDur prints d with its sign.
func signedDur(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// svg draws every handover and failover trial of every subject as dots,
// one row per subject, with the p50 marked: handovers on a logarithmic
// axis, failovers as the time beyond the TTL on a linear one.
func (r *report) svg() []byte {
	type row struct {
		label  string
		ho, fo []float64 // handover ns; failover minus TTL, ns
		ho50   float64
		fo50   float64
	}
	var rows []row
	hoLo, hoHi := math.Inf(1), math.Inf(-1)
	foLo, foHi := 0.0, 0.0
	for _, s := range r.Subjects {
		ho, fo := s.Result.Handover, s.Result.Failover
		if ho == nil && fo == nil {
			continue
		}
		rw := row{label: fmt.Sprintf("%s/%s TTL %s", s.Name, s.Store, fmtDur(s.TTL))}
		if ho != nil {
			for _, d := range ho.Samples {
				rw.ho = append(rw.ho, float64(d))
			}
			rw.ho50 = float64(ho.P50)
			hoLo = math.Min(hoLo, math.Log10(math.Max(float64(ho.Min), 1e3)))
			hoHi = math.Max(hoHi, math.Log10(float64(ho.Max)))
		}
		if fo != nil {
			for _, d := range fo.Samples {
				v := float64(d - s.TTL)
				rw.fo = append(rw.fo, v)
				foLo, foHi = math.Min(foLo, v), math.Max(foHi, v)
			}
			rw.fo50 = float64(fo.P50 - s.TTL)
		}
		rows = append(rows, rw)
	}
	if math.IsInf(hoLo, 1) {
		hoLo, hoHi = 6, 7
	}
	hoLo, hoHi = math.Floor(hoLo), math.Max(math.Ceil(hoHi), math.Floor(hoLo)+1)
	foStep := niceStep((foHi - foLo) / 5)
	foLo, foHi = math.Floor(foLo/foStep)*foStep, math.Max(math.Ceil(foHi/foStep)*foStep, foStep)

	const (
		labelW = 250
		panelW = 400
		gap    = 40
		rowH   = 22
		top    = 50
	)
	width := labelW + 2*panelW + gap + 30
	bottom := top + rowH*len(rows)
	height := bottom + 50
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	esc := func(s string) string {
		var e bytes.Buffer
		_ = xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	type tick struct {
		v     float64
		label string
	}
	panel := func(title string, x0 int, x func(float64) float64, ticks []tick, pick func(row) ([]float64, float64)) {
		p(`<text x="%d" y="20" font-weight="bold">%s</text>`+"\n", x0, esc(title))
		for _, t := range ticks {
			xx := float64(x0) + x(t.v)*panelW
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", xx, top-10, xx, bottom)
			p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", xx, bottom+16, esc(t.label))
		}
		for i, rw := range rows {
			vs, p50 := pick(rw)
			if len(vs) == 0 {
				continue
			}
			y := top + rowH*i + rowH/2
			for _, v := range vs {
				p(`<circle cx="%.1f" cy="%d" r="3" fill="#1f77b4" fill-opacity="0.45"/>`+"\n", float64(x0)+x(v)*panelW, y)
			}
			xm := float64(x0) + x(p50)*panelW
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d62728" stroke-width="2"/>`+"\n", xm, y-8, xm, y+8)
		}
	}
	clamp := func(v float64) float64 { return math.Max(0, math.Min(1, v)) }
	var hoTicks, foTicks []tick
	for e := hoLo; e <= hoHi; e++ {
		hoTicks = append(hoTicks, tick{math.Pow(10, e), fmtDur(time.Duration(math.Pow(10, e)))})
	}
	for v := foLo; v <= foHi+foStep/2; v += foStep {
		label := "+" + fmtDur(time.Duration(v))
		if v < 0 {
			label = "−" + fmtDur(time.Duration(-v))
		}
		foTicks = append(foTicks, tick{v, label})
	}
	panel("clean handover: A's release call → B holds", labelW,
		func(v float64) float64 { return clamp((math.Log10(math.Max(v, 1)) - hoLo) / (hoHi - hoLo)) },
		hoTicks, func(rw row) ([]float64, float64) { return rw.ho, rw.ho50 })
	panel("crash failover: B holds, time after A's last renewal + TTL", labelW+panelW+gap,
		func(v float64) float64 { return clamp((v - foLo) / (foHi - foLo)) },
		foTicks, func(rw row) ([]float64, float64) { return rw.fo, rw.fo50 })
	for i, rw := range rows {
		p(`<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-10, top+rowH*i+rowH/2+4, esc(rw.label))
	}
	p(`<text x="%d" y="%d" fill="#555">dots: trials; red bar: p50; handover on a log axis, failover on a linear one</text>`+"\n", labelW, height-10)
	p("</svg>\n")
	return b.Bytes()
}

// niceStep rounds a raw axis step up to 1, 2 or 5 times a power of ten
// (in nanoseconds, at least a millisecond).
func niceStep(raw float64) float64 {
	raw = math.Max(raw, 1e6)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			return m * pow
		}
	}
	return 10 * pow
}
