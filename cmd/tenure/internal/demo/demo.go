package demo

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-dev/tenure/internal/snapshot"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// Config says how to start a worker process.
type Config struct {
	// Worker is the command that runs [Worker]: the program and the
	// arguments before the worker's own flags, e.g. [tenure demo-worker].
	Worker []string
	// Env is added to each worker's environment.
	Env []string
	// Dir holds the scenes' SQLite files; default: a new temporary
	// directory, removed afterwards.
	Dir string
	// TTL of the lease; default 2 s, short so the story fits in a minute.
	TTL time.Duration
	// Scenes lists the scenes to play, [ScenePause] and [SceneClone];
	// default both.
	Scenes []string
}

const (
	workers = 3
	// sceneTimeout bounds a scene, which takes a few seconds on an idle
	// machine: a fraction of a minute of work, with room for a machine
	// so loaded that its workers barely start.
	sceneTimeout = 60 * time.Second
)

// The scenes Main plays: --scene pause, clone or all.
const (
	ScenePause = "pause"
	SceneClone = "clone"
	SceneAll   = "all"
)

// Main is `tenure demo`. worker is the command that runs [Worker].
func Main(ctx context.Context, args []string, worker []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ttl := fs.Duration("ttl", 2*time.Second, "lease TTL of the demo (at least 1s)")
	sceneFlag := fs.String("scene", SceneAll, "the scene to play: pause, clone or all")
	if err := fs.Parse(args); err != nil {
		return 64
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tenure: demo: unexpected argument %q\n", fs.Arg(0))
		return 64
	}
	if *ttl < time.Second || *ttl > time.Minute {
		fmt.Fprintf(stderr, "tenure: demo: --ttl %s must be between 1s and 1m\n", *ttl)
		return 64
	}
	cfg := Config{Worker: worker, TTL: *ttl}
	switch *sceneFlag {
	case ScenePause:
		cfg.Scenes = []string{ScenePause}
	case SceneClone:
		cfg.Scenes = []string{SceneClone}
	case SceneAll:
	default:
		fmt.Fprintf(stderr, "tenure: demo: --scene %q is not a scene; use pause, clone or all\n", *sceneFlag)
		return 64
	}
	ok, err := Run(ctx, cfg, stdout)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "tenure: demo: %v\n", err)
		return 1
	case !ok:
		return 1
	}
	return 0
}

// verdict is one line of the verdict: a scene's charges and the count
// the story needs.
type verdict struct {
	label       string
	got, wanted int
}

// Run plays the scenes cfg names (default both): the paused leader with
// fencing, then without; the cloned holder with the strict fence, then
// with the token fence. It prints the timelines and the verdict to out and
// reports whether the story came out as it must: one charge with fencing,
// two without; one with the strict fence, two with the token fence alone.
func Run(ctx context.Context, cfg Config, out io.Writer) (bool, error) {
	if cfg.TTL == 0 {
		cfg.TTL = 2 * time.Second
	}
	if len(cfg.Scenes) == 0 {
		cfg.Scenes = []string{ScenePause, SceneClone}
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "tenure-demo-")
		if err != nil {
			return false, err
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	var verdicts []verdict
	for _, sc := range cfg.Scenes {
		switch sc {
		case ScenePause:
			v, err := pauseScenes(ctx, cfg, out)
			if err != nil {
				return false, err
			}
			verdicts = append(verdicts, v...)
		case SceneClone:
			v, err := cloneScenes(ctx, cfg, out)
			if err != nil {
				return false, err
			}
			verdicts = append(verdicts, v...)
		default:
			return false, fmt.Errorf("unknown scene %q; the scenes are %s and %s", sc, ScenePause, SceneClone)
		}
	}
	ok := true
	fmt.Fprintf(out, "\nVerdict:\n")
	for _, v := range verdicts {
		fmt.Fprintf(out, "  %-16s run %d charged %d time(s) %s\n", v.label+":", run, v.got, mark(v.got == v.wanted))
		ok = ok && v.got == v.wanted
	}
	switch {
	case !ok:
		fmt.Fprintf(out, "The story did not come out as it must: see the timelines above.\n")
	case slices.Contains(cfg.Scenes, ScenePause) && slices.Contains(cfg.Scenes, SceneClone):
		fmt.Fprintf(out, "%s\n%s\n", pauseMoral, cloneMoral)
	case slices.Contains(cfg.Scenes, ScenePause):
		fmt.Fprintf(out, "%s\n", pauseMoral)
	default:
		fmt.Fprintf(out, "%s\n", cloneMoral)
	}
	return ok, nil
}

const (
	pauseMoral = "The lease alone did not stop the paused leader; the fence did. That is the promise: once a write\nwith token y was accepted, no write with a token below y is."
	cloneMoral = "A snapshot is a leader factory: both copies hold the same token, so the token fence lets both\nwrite. The strict fence advances the renewal chain with each write: only one copy ever passes."
)

// pauseScenes plays the paused leader with fencing, then without.
func pauseScenes(ctx context.Context, cfg Config, out io.Writer) ([]verdict, error) {
	fmt.Fprintf(out, "tenure demo: %d workers contend for %q (TTL %s) and charge tonight's run through a ledger.\n", workers, leaseName, cfg.TTL)
	fmt.Fprintf(out, "The leader is frozen (SIGSTOP) right after it read its token, for longer than the TTL.\n")
	var vs []verdict
	for i, fenced := range []bool{true, false} {
		title, v := "With fencing: the ledger checks the token (sqlitestore.Fence)", verdict{label: "with fencing", wanted: 1}
		if !fenced {
			title, v = "Without fencing: the same scene, the ledger takes any write", verdict{label: "without fencing", wanted: 2}
		}
		fmt.Fprintf(out, "\n%s\n", title)
		n, err := scene(ctx, cfg, fenced, filepath.Join(cfg.Dir, fmt.Sprintf("scene-%d.db", i+1)), out)
		if err != nil {
			return nil, err
		}
		v.got = n
		vs = append(vs, v)
	}
	return vs, nil
}

// cloneScenes plays the cloned holder with the strict fence, then with
// the token fence.
func cloneScenes(ctx context.Context, cfg Config, out io.Writer) ([]verdict, error) {
	fmt.Fprintf(out, "\ntenure demo, the clone: worker-1 holds %q; its host is snapshotted and the snapshot\n", leaseName)
	fmt.Fprintf(out, "restored twice. Both copies wake up as worker-1, with its token and renewal seq, and charge the run.\n")
	var vs []verdict
	for i, strict := range []bool{true, false} {
		title, v := "With the strict fence: each write advances the lease's renewal chain (seq) in the ledger's transaction", verdict{label: "strict fence", wanted: 1}
		if !strict {
			title, v = "With the token fence alone: each copy charges with the token its memory held (sqlitestore.Fence)", verdict{label: "token fence", wanted: 2}
		}
		fmt.Fprintf(out, "\n%s\n", title)
		n, err := cloneScene(ctx, cfg, strict, filepath.Join(cfg.Dir, fmt.Sprintf("clone-%d.db", i+1)), out)
		if err != nil {
			return nil, err
		}
		v.got = n
		vs = append(vs, v)
	}
	return vs, nil
}

func mark(ok bool) string {
	if ok {
		return "(as expected)"
	}
	return "(NOT as expected)"
}

// event is one line a worker printed, stamped on arrival.
type event struct {
	at     time.Duration
	worker int
	kind   string
	fields map[string]string
}

// workerSet is the worker processes of one scene and the events they
// print.
type workerSet struct {
	procs    []*exec.Cmd
	events   chan event
	readers  sync.WaitGroup
	stderrMu sync.Mutex
	stderr   strings.Builder
}

// startWorkers starts one worker per element of args (its flags), numbered
// from 1, and stamps their events with the time since start.
func startWorkers(cfg Config, start time.Time, args [][]string) (*workerSet, error) {
	ws := &workerSet{events: make(chan event, 64)}
	for i, a := range args {
		id := i + 1
		cmd := exec.Command(cfg.Worker[0], append(append([]string{}, cfg.Worker[1:]...), a...)...)
		cmd.Env = append(os.Environ(), cfg.Env...)
		cmd.Stderr = writerFunc(func(p []byte) (int, error) {
			ws.stderrMu.Lock()
			defer ws.stderrMu.Unlock()
			return ws.stderr.Write(p)
		})
		pipe, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			go func() { ws.readers.Wait(); close(ws.events) }()
			ws.stop()
			return nil, fmt.Errorf("start worker %d: %w", id, err)
		}
		ws.procs = append(ws.procs, cmd)
		ws.readers.Go(func() {
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				kind, fields := parse(sc.Text())
				ws.events <- event{at: time.Since(start), worker: id, kind: kind, fields: fields}
			}
		})
	}
	go func() { ws.readers.Wait(); close(ws.events) }()
	return ws, nil
}

// stop resumes and terminates every worker and waits for them.
func (ws *workerSet) stop() {
	for _, p := range ws.procs {
		_ = p.Process.Signal(syscall.SIGCONT)
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for range ws.events {
	}
	for _, p := range ws.procs {
		_ = p.Wait()
	}
}

// failed adds what the workers said on standard error to err.
func (ws *workerSet) failed(err error) error {
	ws.stderrMu.Lock()
	defer ws.stderrMu.Unlock()
	return fmt.Errorf("%w\nworkers said:\n%s", err, ws.stderr.String())
}

// next returns the next event, or why the scene cannot go on.
func (ws *workerSet) next(ctx context.Context) (event, error) {
	select {
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return event{}, fmt.Errorf("the scene did not finish within %s", sceneTimeout)
		}
		return event{}, fmt.Errorf("interrupted: %w", ctx.Err())
	case ev, open := <-ws.events:
		if !open {
			return event{}, errors.New("the workers exited before the scene finished")
		}
		return ev, nil
	}
}

func say(out io.Writer, at time.Duration, who, text string) {
	fmt.Fprintf(out, "  %+6.2fs  %-9s %s\n", at.Seconds(), who, text)
}

// scene runs the workers on a fresh file and returns how many charges the
// ledger holds for the run.
func scene(ctx context.Context, cfg Config, fenced bool, path string, out io.Writer) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, sceneTimeout)
	defer cancel()
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	if err := createLedger(ctx, st.DB()); err != nil {
		return 0, err
	}

	start := time.Now()
	args := make([][]string, workers)
	for i := range args {
		args[i] = []string{"--db", path, "--id", fmt.Sprint(i + 1), fmt.Sprintf("--fenced=%t", fenced), "--ttl", cfg.TTL.String()}
	}
	ws, err := startWorkers(cfg, start, args)
	if err != nil {
		return 0, err
	}
	frozen, taken := 0, false
	var frozenAt time.Duration
	err = func() error {
		for {
			ev, err := ws.next(ctx)
			if err != nil {
				return err
			}
			say(out, ev.at, fmt.Sprintf("worker-%d", ev.worker), describe(ev))
			switch {
			case ev.kind == "charging" && frozen == 0:
				frozen, frozenAt = ev.worker, ev.at
				if err := ws.procs[frozen-1].Process.Signal(syscall.SIGSTOP); err != nil {
					return err
				}
				say(out, time.Since(start), "demo", fmt.Sprintf("SIGSTOP worker-%d: frozen before its write lands", frozen))
			case frozen != 0 && ev.worker != frozen && ev.kind == "charged" && !taken:
				taken = true
				if err := ws.procs[frozen-1].Process.Signal(syscall.SIGCONT); err != nil {
					return err
				}
				say(out, time.Since(start), "demo", fmt.Sprintf("SIGCONT worker-%d after %.1fs (TTL %s): it finishes its write with its old token", frozen, (time.Since(start)-frozenAt).Seconds(), cfg.TTL))
			case taken && ev.worker == frozen && (ev.kind == "fenced" || ev.kind == "charged"):
				return nil
			}
		}
	}()
	ws.stop()
	if err != nil {
		return 0, ws.failed(err)
	}
	return charges(context.WithoutCancel(ctx), st.DB())
}

// clones is how many times the clone scene restores the holder's state.
const clones = 2

// cloneScene acquires the lease as worker-1 on a fresh file, restores
// worker-1's state in two worker processes, lets each charge the run once
// and returns how many charges the ledger holds.
func cloneScene(ctx context.Context, cfg Config, strict bool, path string, out io.Writer) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, sceneTimeout)
	defer cancel()
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	if err := createLedger(ctx, st.DB()); err != nil {
		return 0, err
	}
	start := time.Now()
	holder := store.Holder{Label: "worker-1", Instance: fmt.Sprintf("%016x", rand.Uint64())}
	g, err := st.Acquire(ctx, store.AcquireParams{Name: leaseName, Holder: holder, TTL: cfg.TTL})
	if err != nil {
		return 0, err
	}
	say(out, time.Since(start), "worker-1", fmt.Sprintf("acquired %s, token %d, seq %d", leaseName, g.Token, g.Seq))
	state, err := encodeTenure(snapshot.Tenure{Name: leaseName, Holder: holder, Token: g.Token, Seq: g.Seq, Remaining: g.Remaining * 9 / 10})
	if err != nil {
		return 0, err
	}
	say(out, time.Since(start), "demo", fmt.Sprintf("snapshot of worker-1's host restored %d times: clone-1 and clone-2 start", clones))
	args := make([][]string, clones)
	for i := range args {
		args[i] = []string{"--db", path, "--id", fmt.Sprint(i + 1), "--clone", state, fmt.Sprintf("--strict=%t", strict), "--ttl", cfg.TTL.String()}
	}
	ws, err := startWorkers(cfg, start, args)
	if err != nil {
		return 0, err
	}
	err = func() error {
		done := 0
		for done < clones {
			ev, err := ws.next(ctx)
			if err != nil {
				return err
			}
			say(out, ev.at, fmt.Sprintf("clone-%d", ev.worker), describe(ev))
			switch ev.kind {
			case "charged", "fenced", "chain-refused", "stood-down":
				done++
			}
		}
		return nil
	}()
	ws.stop()
	if err != nil {
		return 0, ws.failed(err)
	}
	return charges(context.WithoutCancel(ctx), st.DB())
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// parse splits "kind key=value ..." into its kind and fields.
func parse(line string) (string, map[string]string) {
	parts := strings.Fields(line)
	if len(parts) == 0 {
		return "", nil
	}
	fields := make(map[string]string, len(parts)-1)
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		fields[k] = strings.Trim(v, `"`)
	}
	return parts[0], fields
}

func describe(ev event) string {
	f := ev.fields
	switch ev.kind {
	case "acquired":
		return fmt.Sprintf("acquired %s, token %s", leaseName, f["token"])
	case "charging":
		return fmt.Sprintf("read token %s, calling the payment provider for run %s", f["token"], f["run"])
	case "charged":
		return fmt.Sprintf("CHARGED run %s with token %s", f["run"], f["token"])
	case "fenced":
		return fmt.Sprintf("late charge with token %s REFUSED by the fence (it already accepted token %s)", f["token"], f["recorded"])
	case "idle":
		return fmt.Sprintf("run %s is already charged: nothing to do", f["run"])
	case "restored":
		return fmt.Sprintf("restored as %s: holds token %s at seq %s", f["holder"], f["token"], f["seq"])
	case "chain-refused":
		return fmt.Sprintf("charge with token %s at seq %s REFUSED by the strict fence: the renewal chain moved on (the other copy wrote first)", f["token"], f["seq"])
	case "stood-down":
		if f["reason"] == "clone" {
			return "stood down before writing: its first renewal found the renewal chain moved on (a clone)"
		}
		return fmt.Sprintf("stood down before writing: %s", f["reason"])
	case "lost":
		return fmt.Sprintf("lost token %s: %s", f["token"], f["reason"])
	}
	return ev.kind
}
