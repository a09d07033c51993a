package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/redis/go-redis/v9"
)

// postgresURL is TENURE_TEST_PG_URL or the local default.
func postgresURL() string {
	if u := os.Getenv("TENURE_TEST_PG_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// Main runs the tenure-chaos command with args (without the program name)
// and returns its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		role := map[string]func(context.Context, []string) error{
			"worker": workerMain, "command": commandMain, "writer": writerMain,
		}[args[0]]
		if role != nil {
			if err := role(ctx, args[1:]); err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			return 0
		}
	}
	if err := harnessMain(ctx, args, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func workerMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tenure-chaos worker", flag.ContinueOnError)
	var a workerArgs
	specJSON := fs.String("spec", "", "the cell's worker spec (JSON)")
	fs.StringVar(&a.adopt, "adopt", "", "run as a clone of this tenure state (base64 JSON)")
	fs.StringVar(&a.parent, "parent", "", "ground truth of the process cloned or forked from")
	fs.Int64Var(&a.counter, "ctr", 0, "the parent's write counter at the snapshot")
	fs.DurationVar(&a.life, "life", 0, "exit after this long (0: run until killed)")
	fs.BoolVar(&a.forked, "forked", false, "run as a forked child")
	fs.IntVar(&a.histFD, "histfd", 0, "append to this inherited file descriptor instead of opening the history")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(*specJSON), &a.spec); err != nil {
		return fmt.Errorf("chaos: worker: bad -spec: %w", err)
	}
	return runWorker(ctx, a)
}

const usage = `tenure-chaos runs chaos cells: N worker processes holding one lease over a
real store, writing through a fenced resource and an unfenced twin, while a
nemesis pauses, kills, partitions, delays, clones and forks them, shifts their
clocks, terminates their sessions and restarts the store (on a
three-member cluster: pauses and kills its leader or a follower; on a
PostgreSQL primary with a standby: fails it over). After every cell a
checker reads the history and both resources; any violation at the fenced
resource fails the cell, and so do fewer than %d fault → lease lost → new
holder cycles ("faults did not bite") and a twin without violations ("not
exercising"). In the postgres-run cell the workers are tenure run (the
tenure binary: -tenure) and their commands' writers escape as a process
would (a zombie thread-group leader, setsid); any write of a tenure's
writer after the next tenure's first write fails it too.

Short (CI) run:   tenure-chaos -backend all -duration 50s -fault-every 2s
Replay a seed:    tenure-chaos -backend redis -seed 1234
Long run:         tenure-chaos -long -report docs

Environment: TENURE_TEST_PG_URL (PostgreSQL, default
postgres://postgres@127.0.0.1:5432/test), TENURE_TEST_MYSQL_URL and
TENURE_TEST_REDIS_URL (the machine's servers); the harness starts its own
Redis, etcd, Consul, nats-server and kube-apiserver (and the etcd-cluster
and consul-cluster cells' three-member clusters) from TENURE_REDIS_BIN
(default redis-server on PATH), TENURE_ETCD_BIN, TENURE_CONSUL_BIN,
TENURE_NATS_BIN and TENURE_KUBE_APISERVER_BIN (tools/*/ensure.sh build
them), and the postgres-failover cell's primary and standby from
PostgreSQL's programs in TENURE_PG_BIN_DIR (default Debian's).

Flags:
`

func harnessMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tenure-chaos", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), usage, MinCycles)
		fs.PrintDefaults()
	}
	backend := fs.String("backend", "all", strings.Join(Backends, ", ")+", a comma-separated list, or all")
	workers := fs.Int("workers", 5, "worker processes per cell")
	ttl := fs.Duration("ttl", 2*time.Second, "lease TTL")
	duration := fs.Duration("duration", 60*time.Second, "length of each cell")
	seed := fs.Uint64("seed", 0, "nemesis seed (0: random; printed either way)")
	seeds := fs.Int("seeds", 1, "seeds per backend (seed, seed+1, ...)")
	every := fs.Duration("fault-every", 2500*time.Millisecond, "mean time between faults")
	gap := fs.Duration("gap", time.Millisecond, "pause between a worker's write pairs")
	work := fs.Duration("work", 5*time.Millisecond, "time between a write's lease check and the write (the work it carries)")
	out := fs.String("out", "", "directory for histories and verdicts (default: a new temporary directory)")
	long := fs.Bool("long", false, "long mode: 6 minutes per cell, 2 seeds per backend, and write the report")
	report := fs.String("report", "", "write RELIABILITY.md and timeline.svg into this directory")
	parallel := fs.Int("parallel", 1, "cells run at once")
	noFloor := fs.Bool("no-token-floor", false, "postgres-failover: promote the standby without raising the token floor (the negative control of the floor: tokens are handed out twice)")
	tenureBin := fs.String("tenure", "", "the tenure binary the "+runBackend+" cell runs (default: tenure beside tenure-chaos, else on PATH)")
	rereport := fs.String("rereport", "", "write the report (-report) from the verdicts of an earlier run's -out directory, run nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *long {
		setIfUnset(fs, "duration", func() { *duration = 6 * time.Minute })
		setIfUnset(fs, "seeds", func() { *seeds = 2 })
		setIfUnset(fs, "report", func() { *report = "docs" })
	}
	if *rereport != "" {
		return reReport(*rereport, *report, args)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	if *out == "" {
		if *out, err = os.MkdirTemp("", "tenure-chaos-"); err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
	}
	// go-redis logs its reconnection attempts through one global logger:
	// while the nemesis restarts a cell's Redis they would bury the
	// harness's own output, so they go to a file beside the histories.
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	redisLog, err := os.OpenFile(filepath.Join(*out, "go-redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	defer redisLog.Close()
	redis.SetLogger(redisLogger{log.New(redisLog, "", log.LstdFlags)})
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano()%1_000_000_000) + 1
	}
	list := Backends
	if *backend != "all" {
		list = strings.Split(*backend, ",")
	}
	tenurePath := ""
	if slices.ContainsFunc(list, runCell) {
		if tenurePath, err = tenureBinary(*tenureBin, exe); err != nil {
			return err
		}
	}
	var cfgs []CellConfig
	for _, b := range list {
		for i := range *seeds {
			cfgs = append(cfgs, CellConfig{Backend: b, Workers: *workers, TTL: *ttl, Duration: *duration, Seed: *seed + uint64(i),
				FaultEvery: *every, Gap: *gap, Work: *work, Out: *out, Exe: exe, Tenure: tenurePath, PGURL: postgresURL(), NoTokenFloor: *noFloor})
		}
	}
	results := make([]*CellResult, len(cfgs))
	errs := make([]error, len(cfgs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(*parallel, 1))
	for i, cfg := range cfgs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			mu.Lock()
			fmt.Fprintf(stdout, "cell %s seed %d: %s, %d workers, TTL %s, a fault every %s (replay: tenure-chaos -backend %s -seed %d -duration %s -fault-every %s)\n",
				cfg.Backend, cfg.Seed, cfg.Duration, cfg.Workers, cfg.TTL, cfg.FaultEvery, cfg.Backend, cfg.Seed, cfg.Duration, cfg.FaultEvery)
			mu.Unlock()
			res, err := RunCell(ctx, cfg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[i] = fmt.Errorf("chaos: cell %s seed %d: %w", cfg.Backend, cfg.Seed, err)
				return
			}
			results[i] = res
			fmt.Fprintln(stdout, res.Summary())
			fmt.Fprintf(stdout, "  history: %s\n", res.History)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	failed := 0
	for _, r := range results {
		if !r.Passed() {
			failed++
		}
	}
	if *report != "" {
		cmdline := "tenure-chaos " + strings.Join(args, " ")
		if err := WriteReport(*report, cmdline, results); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "report: %s\n", filepath.Join(*report, "RELIABILITY.md"))
	}
	if failed > 0 {
		return fmt.Errorf("chaos: %d of %d cells failed", failed, len(results))
	}
	return nil
}

// reReport rebuilds the report from the verdict.json files under out.
func reReport(out, report string, args []string) error {
	if report == "" {
		return fmt.Errorf("chaos: %w: -rereport needs -report", store.ErrInvalid)
	}
	paths, err := filepath.Glob(filepath.Join(out, "*", "verdict.json"))
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	var results []*CellResult
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		var r CellResult
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("chaos: %s: %w", p, err)
		}
		results = append(results, &r)
	}
	order := map[string]int{}
	for i, b := range Backends {
		order[b] = i
	}
	sort.SliceStable(results, func(i, j int) bool { return order[results[i].Config.Backend] < order[results[j].Config.Backend] })
	cmdline := os.Getenv("TENURE_CHAOS_CMDLINE")
	if cmdline == "" {
		cmdline = "tenure-chaos " + strings.Join(args, " ")
	}
	return WriteReport(report, cmdline, results)
}

// redisLogger writes go-redis's log lines to a file.
type redisLogger struct{ l *log.Logger }

func (r redisLogger) Printf(_ context.Context, format string, v ...any) { r.l.Printf(format, v...) }

func setIfUnset(fs *flag.FlagSet, name string, set func()) {
	seen := false
	fs.Visit(func(f *flag.Flag) { seen = seen || f.Name == name })
	if !seen {
		set()
	}
}
