package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure/store"
)

// The postgres-run cell: each worker is the real tenure binary, `tenure
// run --wait`, whose command starts a writer that escapes the usual
// notion of a process (its main thread exits while another thread writes)
// or its process group (setsid), or both. The writer writes with
// TENURE_TOKEN, fenced by the token (pgfence's Fence in the write's own
// transaction), and the same write to the twin.

// runBackend is the cell whose workers run under tenure run.
const runBackend = "postgres-run"

// runCell reports whether a backend's workers are tenure run processes.
func runCell(backend string) bool {
	b, err := backendNamed(backend)
	return err == nil && b.run
}

// runFaults are the faults of the tenure run cell, each repeated by
// weight. They hit tenure run, the slot's main process; its command and
// writer are reached only through it, except by a freeze.
var runFaults = []string{faultPause, faultPause, faultPause, faultPause, faultKill, faultKill, faultForce, faultForce,
	faultFreeze, faultFreeze, faultCut, faultBlackHole, faultDelay, faultLoseReply, faultTerminate}

// Writer modes: what the command under tenure run does with its writer.
const (
	// modeZombieBG: the writer's main thread exits while another thread
	// writes (the thread-group leader reads as a zombie); the command
	// starts it in the background and exits 0 at once.
	modeZombieBG = "zombie-bg"
	// modeZombieSetsid: the same writer, after setsid; the command runs
	// on for a while and exits 0.
	modeZombieSetsid = "zombie-setsid"
	// modeSetsid: an ordinary writer after setsid; the command runs on.
	modeSetsid = "setsid"
	// modeZombie: the zombie-leader writer in the command's process
	// group; the command runs on.
	modeZombie = "zombie"
)

// runModes are the writer modes, drawn by a hash of the token ([tokenDraw]):
// the two modes the supervision bug lets through come twice.
var runModes = []string{modeZombieBG, modeZombieSetsid, modeSetsid, modeZombieBG, modeZombieSetsid, modeZombie}

// tokenDraw returns the i-th number in [0, 1) drawn from tok (splitmix64):
// the tokens a store hands out are not evenly spread over any modulus.
func tokenDraw(tok int64, i uint64) float64 {
	z := uint64(tok)*0x9e3779b97f4a7c15 + i*0xbf58476d1ce4e5b9
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// Faults of the postgres-run cell, beyond pause, kill and the connection
// faults, which there hit the tenure run process.
const (
	faultForce  = "force-release" // tenure release --force of the lease
	faultFreeze = "freeze"        // SIGSTOP the holder's tenure run, its watchdog and every descendant (a machine pause) for 1.5–4 × TTL
)

// runStoreURL is the --store URL tenure run gets: PostgreSQL at addr
// (the slot's proxy, or the server itself when empty), the cell's schema.
func (c *cell) runStoreURL(addr, app string) (string, error) {
	u, err := pgURL(c.cfg.PGURL, addr, app)
	if err != nil {
		return "", err
	}
	return u + "&tenure_schema=" + c.spec.Schema, nil
}

// launchRun starts slot s's tenure run, whose command is this binary in
// the command role, and registers it as the slot's main process. When it
// exits (its command ended, it lost the lease, or the nemesis killed it)
// the slot starts another after TTL/10, as a service manager would.
func (c *cell) launchRun(s *slot) (*exec.Cmd, error) {
	sp := c.specFor(s)
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	u, err := c.runStoreURL(sp.StoreAddr, s.app)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.cfg.Tenure, "run", "--wait", "--name", sp.Lease, "--ttl", sp.TTL.String(), "--store", u,
		"--", c.cfg.Exe, "command", "-spec", string(b))
	cmd.Stderr = c.logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("chaos: start tenure run: %w", err)
	}
	_ = w.Close()
	pid := cmd.Process.Pid
	if gt, err := procGroundTruth(pid); err == nil {
		c.mu.Lock()
		c.procs[gt] = &procInfo{gtid: gt, pid: pid, slot: s.i, main: true}
		c.mu.Unlock()
	}
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.readLines(s, pid, r) }()
	go func() {
		defer c.wg.Done()
		_ = cmd.Wait()
		time.Sleep(c.cfg.TTL / 10)
		_ = c.startMain(s)
	}()
	return cmd, nil
}

// forceRelease runs `tenure release --force` of the cell's lease.
func (c *cell) forceRelease(ctx context.Context) error {
	u, err := c.runStoreURL("", "chaos_harness_release")
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 2*c.cfg.TTL)
	defer cancel()
	out, err := exec.CommandContext(rctx, c.cfg.Tenure, "release", "--force", "--store", u, c.spec.Lease).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// freeze stops p (a slot's tenure run) and then every descendant of it,
// its watchdog and its command's tree, scanning again until a scan finds
// none left running: a pause of the whole machine, as far as the slot's
// processes go. It returns the command's processes and the supervisors
// (p, then the processes running p's executable: its watchdog) apart.
func freeze(p *procInfo) (command, supervisors []*procInfo) {
	p.signal(syscall.SIGSTOP)
	supervisors = []*procInfo{p}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.pid))
	seen := map[int]bool{p.pid: true}
	for {
		found := false
		for _, pid := range descendants(p.pid) {
			if seen[pid] {
				continue
			}
			seen[pid] = true
			gt, err := procGroundTruth(pid)
			if err != nil {
				continue
			}
			q := &procInfo{gtid: gt, pid: pid, slot: p.slot}
			q.signal(syscall.SIGSTOP)
			if e, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe != "" && e == exe {
				supervisors = append(supervisors, q)
			} else {
				command = append(command, q)
			}
			found = true
		}
		if !found {
			return command, supervisors
		}
	}
}

// descendants returns the processes below pid, by their parents in /proc.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[n] = pp
	}
	var out []int
	for n := range parent {
		for a, hops := parent[n], 0; a > 1 && hops < 64; a, hops = parent[a], hops+1 {
			if a == pid {
				out = append(out, n)
				break
			}
		}
	}
	sort.Ints(out)
	return out
}

// commandMain is the command tenure run starts: it logs its tenure,
// starts the writer its token's mode says, and exits at once (zombie-bg)
// or after 1–3 × TTL.
func commandMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tenure-chaos command", flag.ContinueOnError)
	specJSON := fs.String("spec", "", "the cell's worker spec (JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var sp spec
	if err := json.Unmarshal([]byte(*specJSON), &sp); err != nil {
		return fmt.Errorf("chaos: command: bad -spec: %w", err)
	}
	tok, err := strconv.ParseInt(os.Getenv("TENURE_TOKEN"), 10, 64)
	if err != nil || tok <= 0 {
		return fmt.Errorf("chaos: command: TENURE_TOKEN %q is not a token: run me under tenure run", os.Getenv("TENURE_TOKEN"))
	}
	proc := groundTruth()
	run, _ := procGroundTruth(os.Getppid())
	hist, err := openHistory(sp.History, proc, sp.Slot)
	if err != nil {
		return err
	}
	defer hist.close()
	mode := runModes[int(tokenDraw(tok, 0)*float64(len(runModes)))]
	// Lives drawn from the token: the command's 1–3 × TTL, the writer's
	// 0.5–2 × TTL beyond it.
	frac := func(i uint64) float64 { return tokenDraw(tok, i) }
	life := time.Duration((1 + 2*frac(1)) * float64(sp.TTL))
	if mode == modeZombieBG {
		life = 0
	}
	wlife := life + time.Duration((0.5+1.5*frac(2))*float64(sp.TTL))
	hist.log(Event{Kind: kindStart, Parent: run, Token: tok, Detail: "command " + mode})
	hist.log(Event{Kind: kindAcquired, Token: tok, Holder: os.Getenv("TENURE_HOLDER")})
	fmt.Printf("hello %s\nheld %d %s\n", proc, tok, run)
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("chaos: command: %w", err)
	}
	wargs := []string{"writer", "-spec", *specJSON, "-token", strconv.FormatInt(tok, 10), "-mode", mode,
		"-parent", proc, "-life", wlife.String()}
	cmd := exec.Command(exe, wargs...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if mode == modeZombieSetsid || mode == modeSetsid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("chaos: command: %w", err)
	}
	cmd.ExtraFiles = []*os.File{readyW}
	if err := cmd.Start(); err != nil {
		hist.log(Event{Kind: kindExit, Detail: "writer failed to start: " + err.Error()})
		return fmt.Errorf("chaos: command: start writer: %w", err)
	}
	_ = readyW.Close()
	awaitWriter(ready, cmd.Process.Pid, mode != modeSetsid, sp.TTL)
	select {
	case <-time.After(life):
	case <-ctx.Done():
	}
	hist.log(Event{Kind: kindExit, Detail: "command done"})
	return nil
}

// awaitWriter waits, up to limit, until the writer is under way: its
// writing thread runs (it says so on ready) and, for a zombie writer, its
// main thread has exited (the leader's state reads Z; the kernel offers
// no event for that, so it is polled). A command that exits at once then
// leaves behind what the zombie-bg mode means to leave: a process whose
// leader is a zombie, writing.
func awaitWriter(ready *os.File, pid int, zombie bool, limit time.Duration) {
	defer ready.Close()
	deadline := time.Now().Add(limit)
	_ = ready.SetReadDeadline(deadline)
	if _, err := ready.Read(make([]byte, 1)); err != nil || !zombie {
		return
	}
	for time.Now().Before(deadline) && procState(pid) != "Z" {
		time.Sleep(time.Millisecond)
	}
}

// procState returns the state letter of /proc/PID/stat ("" when gone).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if f := strings.Fields(s[i+1:]); i >= 0 && len(f) > 0 {
		return f[0]
	}
	return ""
}

// writerReadyFD is the descriptor on which the writer tells the command
// that its writing thread runs.
const writerReadyFD = 3

// writerArgs are the writer role's flags.
type writerArgs struct {
	spec   spec
	token  int64
	mode   string
	parent string
	life   time.Duration
}

// writerMain is the writer: for its life (or until SIGTERM) it writes
// pairs with its token, whatever the fence answers. In the zombie modes
// its main thread exits once the writing thread runs: the process lives
// on, its thread-group leader a zombie. The main package pins the main
// goroutine to the main thread for this role (see cmd/tenure-chaos).
func writerMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tenure-chaos writer", flag.ContinueOnError)
	var a writerArgs
	specJSON := fs.String("spec", "", "the cell's worker spec (JSON)")
	fs.Int64Var(&a.token, "token", 0, "the tenure's token")
	fs.StringVar(&a.mode, "mode", "", "the writer mode: "+strings.Join(runModes[:4], ", ")+" or "+modeZombie)
	fs.StringVar(&a.parent, "parent", "", "ground truth of the command that started it")
	fs.DurationVar(&a.life, "life", 0, "write for this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(*specJSON), &a.spec); err != nil {
		return fmt.Errorf("chaos: writer: bad -spec: %w", err)
	}
	proc := groundTruth()
	hist, err := openHistory(a.spec.History, proc, a.spec.Slot)
	if err != nil {
		return err
	}
	hist.log(Event{Kind: kindStart, Parent: a.parent, Token: a.token, Detail: "writer " + a.mode})
	fmt.Printf("hello %s\n", proc)
	u, err := pgURL(a.spec.PGURL, "", a.spec.App+"_writer")
	if err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return fmt.Errorf("chaos: writer: %w", err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("chaos: writer: %w", err)
	}
	res, err := newPGResource(pool, a.spec.Schema)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		writeFor(ctx, res, hist, proc, a)
		hist.log(Event{Kind: kindExit, Detail: "writer done"})
		close(done)
		if a.mode != modeSetsid {
			// The main thread is gone: nothing returns from main.
			os.Exit(0)
		}
	}()
	ready := os.NewFile(writerReadyFD, "ready")
	_, _ = ready.Write([]byte{1})
	_ = ready.Close()
	if a.mode != modeSetsid {
		exitMainThread()
	}
	<-done
	return nil
}

// exitMainThread ends the calling thread alone (exit(2), not
// exit_group(2)); the process goes on with its other threads. Through
// syscall.Syscall the runtime counts the goroutine as in a system call,
// so no stop-the-world waits for it.
func exitMainThread() {
	_, _, _ = syscall.Syscall(syscall.SYS_EXIT, 0, 0, 0)
}

// writeFor makes write pairs for a.life: the fenced write (the token
// fence and the chain's next link in one transaction), then the same
// write to the twin.
func writeFor(ctx context.Context, res *pgResource, hist *historyWriter, proc string, a writerArgs) {
	end := time.Now().Add(a.life)
	tok := store.Token(a.token)
	for n := int64(1); ctx.Err() == nil && time.Now().Before(end); n++ {
		time.Sleep(a.spec.Work)
		wid := makeWID(proc, n)
		wctx, cancel := context.WithTimeout(ctx, a.spec.TTL)
		hist.log(Event{Kind: kindTry, Res: resFenced, WID: wid, Token: a.token})
		ferr := pgx.BeginFunc(wctx, res.pool, func(tx pgx.Tx) error {
			if err := res.fencer.Fence(wctx, tx, resFenced, tok); err != nil {
				return err
			}
			return res.link(wctx, tx, resFenced, tok, wid)
		})
		hist.log(Event{Kind: kindDone, Res: resFenced, WID: wid, Token: a.token, Result: outcome(ferr), Detail: errText(ferr)})
		hist.log(Event{Kind: kindTry, Res: resTwin, WID: wid, Token: a.token})
		terr := res.twin(wctx, tok, wid)
		hist.log(Event{Kind: kindDone, Res: resTwin, WID: wid, Token: a.token, Result: outcome(terr), Detail: errText(terr)})
		cancel()
		time.Sleep(a.spec.Gap)
	}
}

// invOverlap is the postgres-run cell's supervision invariant: no write
// of a tenure's writer after a later tenure's first write.
const invOverlap = "commands overlapped"

// overlaps checks the supervision claim of tenure run over a history:
// every write attempt (fenced or twin) of a tenure's writer comes before
// the first write attempt of every later tenure (a greater token). It
// reports one violation per writer that overlapped, naming both tenures.
// Two kinds of late writes are counted apart:
//
//   - a write by a process a freeze stopped, made within TTL/2 after the
//     freeze ended (excused): a pause of the whole machine stops tenure
//     run's watchdog with the command, and only the fence covers the
//     write in flight when it resumes (DESIGN, tenure run);
//   - a write within one TTL after `tenure release --force` ended the
//     tenure, before the next one began (forced): reported apart, since
//     it would be the forced release's doing, not supervision's. Release
//     keeps the lease's expiry and moves the holder's chain on, so the
//     store lets the next holder in only after the old one stood down;
//     the cell fails on either kind.
func overlaps(events []Event, ttl time.Duration) (v, forcedV Violations, excused int) {
	evs := byTime(events)
	type writer struct {
		mode string
		slot int
		tok  int64
	}
	writers := map[string]writer{}
	first := map[int64]Event{}
	forced := map[int64]int64{} // token → when tenure release --force struck it
	type span struct{ from, to int64 }
	frozen := map[string][]span{} // process → its freezes, to the end of the excuse
	for _, e := range evs {
		switch {
		case e.Kind == kindStart && strings.HasPrefix(e.Detail, "writer "):
			writers[e.Proc] = writer{mode: strings.TrimPrefix(e.Detail, "writer "), slot: e.Slot, tok: e.Token}
		case e.Kind == kindTry:
			if _, ok := first[e.Token]; !ok {
				first[e.Token] = e
			}
		case e.Kind == kindFault && e.Fault == faultForce && e.Token != 0:
			if _, ok := forced[e.Token]; !ok {
				forced[e.Token] = e.T
			}
		case e.Kind == kindHeal && e.Fault == faultFreeze:
			// The heal names the processes stopped; Dur is the freeze's.
			for _, p := range strings.Fields(e.Detail) {
				frozen[p] = append(frozen[p], span{e.T - e.Dur, e.T + int64(ttl/2)})
			}
		}
	}
	toks := make([]int64, 0, len(first))
	for t := range first {
		toks = append(toks, t)
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i] < toks[j] })
	// next[t] is the earliest first write of a tenure later than t.
	next := map[int64]Event{}
	var best Event
	for i := len(toks) - 1; i >= 0; i-- {
		t := toks[i]
		if best.Kind != "" {
			next[t] = best
		}
		if f := first[t]; best.Kind == "" || f.T < best.T {
			best = f
		}
	}
	isExcused := func(proc string, t int64) bool {
		for _, s := range frozen[proc] {
			if t >= s.from && t <= s.to {
				return true
			}
		}
		return false
	}
	type late struct {
		n           int
		first, last int64
		after       Event
	}
	type lateSet struct {
		by    map[string]*late
		procs []string
	}
	note := func(ls *lateSet, e, after Event) {
		l := ls.by[e.Proc]
		if l == nil {
			l = &late{first: e.T, after: after}
			ls.by[e.Proc] = l
			ls.procs = append(ls.procs, e.Proc)
		}
		l.n++
		l.last = e.T
	}
	overlapping, forcing := &lateSet{by: map[string]*late{}}, &lateSet{by: map[string]*late{}}
	for _, e := range evs {
		w, ok := writers[e.Proc]
		if e.Kind != kindTry || !ok {
			continue
		}
		nx, ok := next[e.Token]
		if !ok || e.T <= nx.T {
			continue
		}
		f, wasForced := forced[w.tok]
		switch {
		case isExcused(e.Proc, e.T):
			excused++
		case wasForced && f < nx.T && e.T <= f+int64(ttl):
			note(forcing, e, nx)
		default:
			note(overlapping, e, nx)
		}
	}
	report := func(v *Violations, ls *lateSet) {
		for _, p := range ls.procs {
			w, l := writers[p], ls.by[p]
			why := ""
			if f, ok := forced[w.tok]; ok && f < l.after.T {
				why = fmt.Sprintf("; tenure release --force had ended tenure %d %s before", w.tok, time.Duration(l.after.T-f).Round(time.Millisecond))
			}
			v.add(invOverlap, "tenure %d's writer %s (slot %d, %s) made %d write attempts after tenure %d (slot %d) first wrote at %s: the first %s after, the last %s after%s",
				w.tok, p, w.slot, w.mode, l.n, l.after.Token, l.after.Slot, time.Unix(0, l.after.T).UTC().Format("15:04:05.000"),
				time.Duration(l.first-l.after.T).Round(time.Millisecond), time.Duration(l.last-l.after.T).Round(time.Millisecond), why)
		}
	}
	report(&v, overlapping)
	report(&forcedV, forcing)
	return v, forcedV, excused
}

// tenureBinary finds the tenure binary for the postgres-run cell: the
// -tenure flag, else tenure beside this executable, else on PATH.
func tenureBinary(flagValue, exe string) (string, error) {
	if flagValue != "" {
		if _, err := os.Stat(flagValue); err != nil {
			return "", fmt.Errorf("chaos: -tenure %s: %w", flagValue, err)
		}
		return flagValue, nil
	}
	if p := filepath.Join(filepath.Dir(exe), "tenure"); fileExists(p) {
		return p, nil
	}
	if p, err := exec.LookPath("tenure"); err == nil {
		return p, nil
	}
	return "", errors.New("chaos: the " + runBackend + " cell runs the tenure binary, and none was found beside tenure-chaos or on PATH: build it (go build -o tenure ./cmd/tenure) and pass -tenure PATH")
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
