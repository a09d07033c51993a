package demo

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

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
}

const (
	workers      = 3
	sceneTimeout = 30 * time.Second
)

// Main is `tenure demo`. worker is the command that runs [Worker].
func Main(ctx context.Context, args []string, worker []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ttl := fs.Duration("ttl", 2*time.Second, "lease TTL of the demo (at least 1s)")
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
	ok, err := Run(ctx, Config{Worker: worker, TTL: *ttl}, stdout)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "tenure: demo: %v\n", err)
		return 1
	case !ok:
		return 1
	}
	return 0
}

// Run plays the scene with fencing, then without, prints both timelines
// and the verdict to out, and reports whether the story came out as it
// must: one charge with fencing, two without.
func Run(ctx context.Context, cfg Config, out io.Writer) (bool, error) {
	if cfg.TTL == 0 {
		cfg.TTL = 2 * time.Second
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "tenure-demo-")
		if err != nil {
			return false, err
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	fmt.Fprintf(out, "tenure demo: %d workers contend for %q (TTL %s) and charge tonight's run through a ledger.\n", workers, leaseName, cfg.TTL)
	fmt.Fprintf(out, "The leader is frozen (SIGSTOP) right after it read its token, for longer than the TTL.\n")
	var counts [2]int
	for i, fenced := range []bool{true, false} {
		title := "With fencing: the ledger checks the token (sqlitestore.Fence)"
		if !fenced {
			title = "Without fencing: the same scene, the ledger takes any write"
		}
		fmt.Fprintf(out, "\n%s\n", title)
		n, err := scene(ctx, cfg, fenced, filepath.Join(cfg.Dir, fmt.Sprintf("scene-%d.db", i+1)), out)
		if err != nil {
			return false, err
		}
		counts[i] = n
	}
	ok := counts[0] == 1 && counts[1] == 2
	fmt.Fprintf(out, "\nVerdict:\n")
	fmt.Fprintf(out, "  with fencing:    run %d charged %d time(s) %s\n", run, counts[0], mark(counts[0] == 1))
	fmt.Fprintf(out, "  without fencing: run %d charged %d time(s) %s\n", run, counts[1], mark(counts[1] == 2))
	if ok {
		fmt.Fprintf(out, "The lease alone did not stop the paused leader; the fence did. That is the promise: once a write\nwith token y was accepted, no write with a token below y is.\n")
	} else {
		fmt.Fprintf(out, "The story did not come out as it must: see the timelines above.\n")
	}
	return ok, nil
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
	events := make(chan event, 64)
	procs := make([]*exec.Cmd, workers)
	var readers sync.WaitGroup
	var stderr strings.Builder
	var stderrMu sync.Mutex
	for i := range procs {
		id := i + 1
		args := append(append([]string{}, cfg.Worker[1:]...),
			"--db", path, "--id", fmt.Sprint(id), fmt.Sprintf("--fenced=%t", fenced), "--ttl", cfg.TTL.String())
		cmd := exec.Command(cfg.Worker[0], args...)
		cmd.Env = append(os.Environ(), cfg.Env...)
		cmd.Stderr = writerFunc(func(p []byte) (int, error) {
			stderrMu.Lock()
			defer stderrMu.Unlock()
			return stderr.Write(p)
		})
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, fmt.Errorf("start worker %d: %w", id, err)
		}
		procs[i] = cmd
		readers.Go(func() {
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				kind, fields := parse(sc.Text())
				events <- event{at: time.Since(start), worker: id, kind: kind, fields: fields}
			}
		})
	}
	stopAll := func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGCONT)
			_ = p.Process.Signal(syscall.SIGTERM)
		}
	}
	go func() { readers.Wait(); close(events) }()

	say := func(at time.Duration, who, text string) {
		fmt.Fprintf(out, "  %+6.2fs  %-9s %s\n", at.Seconds(), who, text)
	}
	frozen, taken := 0, false
	var frozenAt time.Duration
	err = func() error {
		for {
			select {
			case <-ctx.Done():
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					return fmt.Errorf("the scene did not finish within %s", sceneTimeout)
				}
				return fmt.Errorf("interrupted: %w", ctx.Err())
			case ev, open := <-events:
				if !open {
					return errors.New("the workers exited before the scene finished")
				}
				say(ev.at, fmt.Sprintf("worker-%d", ev.worker), describe(ev))
				switch {
				case ev.kind == "charging" && frozen == 0:
					frozen, frozenAt = ev.worker, ev.at
					if err := procs[frozen-1].Process.Signal(syscall.SIGSTOP); err != nil {
						return err
					}
					say(time.Since(start), "demo", fmt.Sprintf("SIGSTOP worker-%d: frozen before its write lands", frozen))
				case frozen != 0 && ev.worker != frozen && ev.kind == "charged" && !taken:
					taken = true
					if err := procs[frozen-1].Process.Signal(syscall.SIGCONT); err != nil {
						return err
					}
					say(time.Since(start), "demo", fmt.Sprintf("SIGCONT worker-%d after %.1fs (TTL %s): it finishes its write with its old token", frozen, (time.Since(start)-frozenAt).Seconds(), cfg.TTL))
				case taken && ev.worker == frozen && (ev.kind == "fenced" || ev.kind == "charged"):
					return nil
				}
			}
		}
	}()
	stopAll()
	for range events {
	}
	for _, p := range procs {
		_ = p.Wait()
	}
	if err != nil {
		stderrMu.Lock()
		defer stderrMu.Unlock()
		return 0, fmt.Errorf("%w\nworkers said:\n%s", err, stderr.String())
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
	case "lost":
		return fmt.Sprintf("lost token %s: %s", f["token"], f["reason"])
	}
	return ev.kind
}
