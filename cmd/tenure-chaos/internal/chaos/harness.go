package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure/internal/faultnet"
)

// CellConfig describes one cell: a backend, its workers, a duration and a
// seed for the nemesis.
type CellConfig struct {
	Backend    string
	Workers    int
	TTL        time.Duration
	Duration   time.Duration
	Seed       uint64
	FaultEvery time.Duration // mean time between faults
	Gap        time.Duration // pause between a worker's write pairs
	Work       time.Duration // time between a write's lease check and the write
	Out        string        // directory for the cell's history and logs
	Exe        string        // the tenure-chaos binary, re-executed as workers
	Tenure     string        `json:",omitempty"` // the tenure binary: the postgres-run cell's workers are tenure run
	PGURL      string
	// NoTokenFloor makes the postgres-failover cell promote its standby
	// without raising the token floor, to show what the floor prevents.
	NoTokenFloor bool `json:",omitempty"`
}

// CellResult is one cell's outcome.
type CellResult struct {
	Config  CellConfig
	Verdict Verdict
	History string
	Elapsed time.Duration
	// Failures lists why the cell failed; empty when it passed.
	Failures []string
}

// MinCycles is how many "fault → lease lost → new holder" cycles a run
// needs to count.
const MinCycles = 5

// Passed reports whether the cell passed.
func (r *CellResult) Passed() bool { return len(r.Failures) == 0 }

// Summary is one line about the cell.
func (r *CellResult) Summary() string {
	v := r.Verdict
	// What the store's own faults did: its members', its failovers.
	storeFaults := ""
	if len(v.Members) > 0 {
		storeFaults = memberSummary(v.Members)
	}
	if len(v.Failovers) > 0 {
		storeFaults += failoverSummary(v.Failovers)
	}
	status := "PASS"
	if !r.Passed() {
		status = "FAIL: " + strings.Join(r.Failures, "; ")
	}
	if runCell(r.Config.Backend) {
		storeFaults += fmt.Sprintf(", overlaps %d, writes excused after a freeze %d, writers late after tenure release --force %d", v.Overlaps.Total(), v.Excused, v.Forced.Total())
		if len(v.Forced.Examples) > 0 {
			storeFaults += " (" + strings.Join(v.Forced.Examples, " | ") + ")"
		}
	}
	return fmt.Sprintf("%s seed %d: %d faults, %d cycles, %d grants, %d clones, fenced writes %d ok / %d fenced / %d unknown, violations %d, twin violations %d (%s)%s: %s",
		r.Config.Backend, r.Config.Seed, sum(v.Faults), v.Cycles, v.Grants, v.Clones,
		v.Writes[resFenced][resultOK], v.Writes[resFenced][resultFenced], v.Writes[resFenced][resultUnknown],
		v.Fenced.Total(), v.Twin.Total(), formatCounts(v.Twin.Count), storeFaults, status)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range []string{invStale, invWriters, invGrow, invReused, invLost} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// cell is a running cell.
type cell struct {
	cfg    CellConfig
	spec   spec
	hist   *historyWriter
	store  store.Store // the harness's own, direct connection
	reader resource    // direct, to read the chains back
	server *server     // redis, etcd or consul, single or clustered: the harness starts them
	pgPool *pgxpool.Pool
	// pgFailover is the postgres-failover cell's primary and standby.
	pgFailover *pgFailover
	logf       *os.File
	slots      []*slot

	mu     sync.Mutex
	procs  map[string]*procInfo
	tokens map[int64]string
	ending bool
	// storeFault is set while a member of a clustered store is paused or
	// down, or a failover is under way: the nemesis strikes one member at
	// a time, so the cluster keeps its quorum.
	storeFault bool
	// storeCalm is when the last fault of a clustered store's member
	// ended, plus memberCalm: no member is struck before it.
	storeCalm time.Time
	// frozen marks the postgres-run cell's slots under a freeze.
	frozen map[int]bool
	wg     sync.WaitGroup // heals, restarts, readers
}

// slot is one worker position: its proxies (one per member of the
// store) and the current main process.
type slot struct {
	i       int
	proxies []*faultnet.Proxy
	app     string

	mu      sync.Mutex
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan string
}

type procInfo struct {
	gtid string
	pid  int
	slot int
	main bool
}

// RunCell runs one cell and checks it.
func RunCell(ctx context.Context, cfg CellConfig) (*CellResult, error) {
	start := time.Now()
	dir := filepath.Join(cfg.Out, fmt.Sprintf("%s-%d", cfg.Backend, cfg.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	histPath := filepath.Join(dir, "history.jsonl")
	_ = os.Remove(histPath)
	c := &cell{cfg: cfg, procs: map[string]*procInfo{}, tokens: map[int64]string{}}
	var err error
	if c.hist, err = openHistory(histPath, groundTruth(), 0); err != nil {
		return nil, err
	}
	defer c.hist.close()
	if c.logf, err = os.Create(filepath.Join(dir, "workers.log")); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	defer c.logf.Close()
	id := randomHex(4)
	c.spec = spec{Backend: cfg.Backend, PGURL: cfg.PGURL, Lease: "chaos-" + id,
		TTL: cfg.TTL, Gap: cfg.Gap, Work: cfg.Work, History: histPath}
	targets, cleanup, err := c.setup(ctx, id)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	for i := 1; i <= cfg.Workers; i++ {
		s := &slot{i: i, app: fmt.Sprintf("chaos_%s_w%d", id, i), replies: make(chan string, 1)}
		for _, target := range targets {
			p, err := faultnet.Listen(target)
			if err != nil {
				return nil, fmt.Errorf("chaos: proxy: %w", err)
			}
			defer p.Close()
			s.proxies = append(s.proxies, p)
		}
		c.slots = append(c.slots, s)
		if err := c.startMain(s); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	if c.pgFailover != nil {
		c.wg.Go(func() { c.churn(runCtx) })
	}
	c.nemesis(runCtx)
	cancel()
	c.teardown()
	res := &CellResult{Config: cfg, History: histPath}
	events, err := readHistory(histPath)
	if err != nil {
		return nil, err
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer rcancel()
	fenced, err := c.reader.rows(rctx, resFenced)
	if err != nil {
		return nil, err
	}
	twin, err := c.reader.rows(rctx, resTwin)
	if err != nil {
		return nil, err
	}
	res.Verdict = checkCell(cfg.Backend, events, fenced, twin, cfg.TTL)
	res.Elapsed = time.Since(start)
	v := res.Verdict
	if n := v.Fenced.Total(); n > 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("%d violations at the fenced resource: %s", n, strings.Join(v.Fenced.Examples, " | ")))
	}
	if runCell(cfg.Backend) {
		res.Verdict.Overlaps, res.Verdict.Forced, res.Verdict.Excused = overlaps(events, cfg.TTL)
		v = res.Verdict
		if n := v.Overlaps.Total(); n > 0 {
			res.Failures = append(res.Failures, fmt.Sprintf("%d writers went on after the next tenure's command began (tenure run's supervision): %s", n, strings.Join(v.Overlaps.Examples, " | ")))
		}
		if n := v.Forced.Total(); n > 0 {
			res.Failures = append(res.Failures, fmt.Sprintf("%d writers went on after tenure release --force let the next tenure's command begin (a forced release keeps the lease until its holder stood down): %s", n, strings.Join(v.Forced.Examples, " | ")))
		}
	}
	if v.Cycles < MinCycles {
		res.Failures = append(res.Failures, fmt.Sprintf("faults did not bite: %d fault → lease lost → new holder cycles, want at least %d (run invalid)", v.Cycles, MinCycles))
	}
	if v.Twin.Total() == 0 {
		res.Failures = append(res.Failures, "not exercising: the unfenced twin shows no violation")
	}
	if err := writeJSON(filepath.Join(dir, "verdict.json"), res); err != nil {
		return nil, err
	}
	return res, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

// setup prepares the backend: namespaces, migrations, tables, servers,
// the harness's own store and reader. It returns the addresses the
// proxies forward to (one per member of a clustered store) and a cleanup.
func (c *cell) setup(ctx context.Context, id string) ([]string, func(), error) {
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	fail := func(err error) ([]string, func(), error) { cleanup(); return nil, nil, err }
	b, err := backendNamed(c.cfg.Backend)
	if err != nil {
		return fail(err)
	}
	targets, err := b.setup(c, ctx, id, &cleanups)
	if err != nil {
		return fail(err)
	}
	return targets, cleanup, nil
}

// specFor returns the worker spec of slot s.
func (c *cell) specFor(s *slot) spec {
	sp := c.spec
	sp.StoreAddrs = nil
	for _, p := range s.proxies {
		sp.StoreAddrs = append(sp.StoreAddrs, p.Addr())
	}
	sp.StoreAddr = sp.StoreAddrs[0]
	sp.Slot = s.i
	sp.App = s.app
	return sp
}

// launch starts a worker process with extra flags; its stdout lines are
// handled by c.readLines. stdin is returned when wantStdin.
func (c *cell) launch(s *slot, wantStdin bool, extra ...string) (*exec.Cmd, io.WriteCloser, error) {
	b, err := json.Marshal(c.specFor(s))
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: %w", err)
	}
	args := append([]string{"worker", "-spec", string(b)}, extra...)
	cmd := exec.Command(c.cfg.Exe, args...)
	cmd.Stderr = c.logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: %w", err)
	}
	cmd.Stdout = w
	var stdin io.WriteCloser
	if wantStdin {
		if stdin, err = cmd.StdinPipe(); err != nil {
			return nil, nil, fmt.Errorf("chaos: %w", err)
		}
	}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, nil, fmt.Errorf("chaos: start worker: %w", err)
	}
	_ = w.Close()
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.readLines(s, cmd.Process.Pid, r) }()
	go func() { defer c.wg.Done(); _ = cmd.Wait() }()
	return cmd, stdin, nil
}

// each applies f to each of the slot's proxies.
func (s *slot) each(f func(*faultnet.Proxy)) {
	for _, p := range s.proxies {
		f(p)
	}
}

// startMain starts (or restarts) the main worker of slot s, unless the
// cell is ending. It decides and launches under the slot's lock, and
// teardown sets ending before it takes each slot's lock to kill its
// worker: a restart racing the end of the cell either starts before
// teardown reaches the slot, which then kills it, or sees ending and
// starts nothing. (A restart that read ending first and launched after
// teardown passed the slot left a worker nobody killed, and the cell
// waited for it until the test's deadline.)
func (c *cell) startMain(s *slot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.mu.Lock()
	ending := c.ending
	c.mu.Unlock()
	if ending {
		return nil
	}
	if runCell(c.cfg.Backend) {
		cmd, err := c.launchRun(s)
		if err != nil {
			return err
		}
		s.cmd = cmd
		return nil
	}
	cmd, stdin, err := c.launch(s, true)
	if err != nil {
		return err
	}
	s.cmd, s.stdin = cmd, stdin
	return nil
}

// readLines reads what a worker (and any child that inherited its stdout)
// prints: "hello <gtid>", "held <token> <gtid>", "state ...".
func (c *cell) readLines(s *slot, mainPid int, r io.ReadCloser) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "hello":
			pid, _ := strconv.Atoi(strings.SplitN(f[1], ":", 2)[0])
			c.mu.Lock()
			c.procs[f[1]] = &procInfo{gtid: f[1], pid: pid, slot: s.i, main: pid == mainPid && pid != 0}
			c.mu.Unlock()
		case len(f) == 3 && f[0] == "held":
			tok, _ := strconv.ParseInt(f[1], 10, 64)
			c.mu.Lock()
			c.tokens[tok] = f[2]
			c.mu.Unlock()
		case len(f) >= 2 && f[0] == "state":
			select {
			case s.replies <- strings.Join(f[1:], " "):
			default:
			}
		}
	}
}

// teardown ends every fault and every process the cell started.
func (c *cell) teardown() {
	c.mu.Lock()
	c.ending = true
	procs := make([]*procInfo, 0, len(c.procs))
	for _, p := range c.procs {
		procs = append(procs, p)
	}
	c.mu.Unlock()
	for _, s := range c.slots {
		for _, p := range s.proxies {
			p.Restore()
			p.SetDelay(0)
		}
	}
	// Kill the processes the history names, checking that each pid still
	// belongs to the process that logged it.
	for _, p := range procs {
		p.signal(syscall.SIGKILL)
	}
	for _, s := range c.slots {
		s.mu.Lock()
		if s.cmd != nil {
			_ = s.cmd.Process.Kill()
		}
		if s.stdin != nil {
			_ = s.stdin.Close()
		}
		s.mu.Unlock()
	}
	c.wg.Wait()
}

// procGroundTruth reads another process's ground truth.
// signal sends sig to p if its pid still belongs to it. A worker that died
// leaves its pid free for any process on the machine (pids wrap within
// minutes while tests run beside the cell), which must not be stopped or
// killed in its place.
func (p *procInfo) signal(sig syscall.Signal) {
	if gt, err := procGroundTruth(p.pid); err == nil && gt == p.gtid {
		_ = syscall.Kill(p.pid, sig)
	}
}

func procGroundTruth(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", errors.New("chaos: bad stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) <= 19 {
		return "", errors.New("chaos: bad stat")
	}
	return fmt.Sprintf("%d:%s", pid, f[19]), nil
}
