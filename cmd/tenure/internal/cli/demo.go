package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/demo"
)

// DefaultDemoTTL is the default of demo's --ttl.
const DefaultDemoTTL = 2 * time.Second

// demoWorker is the hidden command the demo runs its workers with.
const demoWorker = "demo-worker"

func demoCommand() *command {
	return &command{
		summary:  "see a paused leader and a cloned one stopped by the fences (no setup)",
		synopsis: "demo [--scene all|pause|clone] [--ttl 2s]",
		about: `Demo plays the stories tenure exists for, live, in well under a minute.

The paused leader: three worker processes (tenure itself, re-executed)
contend for the lease "nightly-billing" and charge tonight's billing run
through a ledger. The leader is frozen with SIGSTOP right after it read its
token, for longer than the TTL; a follower takes over with a greater token
and charges the run; the leader is resumed and finishes its write with its
old token. With fencing the ledger refuses that late charge; the same scene
without fencing ends with the customer charged twice.

The clone: a snapshot is a leader factory. worker-1 holds the lease; its
state (identity, token, renewal seq) is restored in two processes, as a VM
snapshot restored twice would be, and each charges the run. With the strict
fence, which advances the lease's renewal chain with every write, only one
copy charges; with the token fence alone both do, for both hold the same
token.

Demo prints the timelines and a verdict. --scene picks one story (default
all: both).

It always uses SQLite files of its own in a new temporary directory,
removed afterwards, whatever --store or TENURE_STORE say: it needs no
server and touches no other store.

It exits 0 only if the fenced and strict-fenced scenes charged the run
exactly once and the unfenced and token-fenced ones twice, 1 otherwise, 64 for a bad flag, and 128+N when
interrupted by signal N.`,
		setup: func(fs *flag.FlagSet) action {
			ttl := durationFlag(fs, "ttl", DefaultDemoTTL, "the demo lease's TTL, a `duration` from 1s to 1m")
			scene := fs.String("scene", demo.SceneAll, "the story to play: all, pause (the paused leader) or clone (the restored snapshot)")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 0 {
					return usagef("demo", "takes no arguments, got %q", strings.Join(args, " "))
				}
				if *scene != demo.SceneAll && *scene != demo.ScenePause && *scene != demo.SceneClone {
					return usagef("demo", "--scene %q is not a story; use all, pause or clone", *scene)
				}
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("demo: cannot find tenure's own executable to start the workers with: %w", err)
				}
				return runDemo(ctx, func(ctx context.Context) int {
					return demo.Main(ctx, []string{"--ttl", ttl.String(), "--scene", *scene}, []string{exe, demoWorker}, e.stdout, e.stderr)
				})
			}
		},
	}
}

// runDemo runs play until it returns or a signal of [forwarded] arrives;
// the signal ends play's context, so that the demo stops its workers and
// removes its files.
func runDemo(ctx context.Context, play func(ctx context.Context) int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	var (
		wg       sync.WaitGroup
		received os.Signal
		done     = make(chan struct{})
	)
	wg.Go(func() {
		select {
		case received = <-sigs:
			cancel()
		case <-done:
		}
	})
	code := play(ctx)
	close(done)
	wg.Wait()
	switch {
	case received != nil:
		return &exitError{code: ExitSignalBase + signum(received)}
	case code == ExitOK:
		return nil
	}
	return &exitError{code: code}
}

func demoWorkerCommand() *command {
	return &command{
		summary:  "internal: one worker process of tenure demo",
		synopsis: demoWorker + " --db PATH --id N [--fenced=BOOL | --clone STATE [--strict=BOOL]] [--ttl D]",
		raw:      true,
		hidden:   true,
		about: `Demo-worker is internal to tenure demo, which starts its workers on an
SQLite file of its own; it is not meant to be run by hand, and its flags
may change. It prints one line per event on standard output.`,
		setup: func(*flag.FlagSet) action {
			return func(ctx context.Context, e *env, args []string) error {
				if code := demo.Worker(ctx, args, e.stdout, e.stderr); code != ExitOK {
					return &exitError{code: code}
				}
				return nil
			}
		},
	}
}
