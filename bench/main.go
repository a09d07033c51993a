// Command bench measures tenure's stores beside the libraries users would
// pick instead (the anchors) through the same phases, interleaved, in one
// run, and compares every latency with the floor of its store measured in
// the same run. See docs/PERFORMANCE.md for how to run it and read it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
)

var allPhases = []string{"floor", "uncontended", "renew", "handover", "failover", "load", "churn", "scale", "token"}

// Output file names, in the -out directory.
const (
	mdName   = "PERFORMANCE-results.md"
	jsonName = "PERFORMANCE-results.json"
	svgName  = "PERFORMANCE-results.svg"
)

type options struct {
	stores, subjects, phases          []string
	profiles                          []profile
	pgURL, redisAddr, etcdURL, outDir string
	consulAddr                        string
	consulMinTTL                      time.Duration
	floorN, acquireN, renewN, blocks  int
	handoverN, handoverPar            int
	failoverN, many, churnRounds      int
	churnClients, scaleClients        []int
	hold, loadWindow, churnDur        time.Duration
	scaleN, scaleConc                 int
	tokenTrials, consulRecords        int
	scaleTTL, scaleWindow, scaleLimit time.Duration
	quick                             bool
	cpuProfile                        string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, log io.Writer) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(log)
	o := &options{}
	stores := fs.String("stores", "postgres,redis,etcd,consul,sqlite", "stores to measure")
	subjects := fs.String("subjects", "all", "libraries to measure: tenure,pglock,redsync,redislock,etcd-mutex,etcd-election,consul-lock, or all")
	phases := fs.String("phases", strings.Join(allPhases, ","), "phases to run")
	ttls := fs.String("ttls", "default,3s", "TTL profiles: default (each library's defaults) and/or whole seconds; failover runs in the non-default ones only")
	fs.StringVar(&o.pgURL, "pg", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL (TLS off: requests are counted on the wire)")
	fs.StringVar(&o.redisAddr, "redis", "127.0.0.1:6379", "Redis address")
	fs.StringVar(&o.etcdURL, "etcd", "", "etcd client URL; empty: start a server from $TENURE_ETCD_BIN (or etcd on PATH)")
	fs.StringVar(&o.consulAddr, "consul", "", "Consul agent HTTP address; empty: start an agent from $TENURE_CONSUL_BIN (or consul on PATH)")
	fs.DurationVar(&o.consulMinTTL, "consul-session-ttl-min", 10*time.Second, "with -consul: the agent's session_ttl_min (Consul's default is 10s; 3s leases need it at most 3s)")
	fs.StringVar(&o.outDir, "out", "bench-out", "directory for "+mdName+", "+jsonName+" and "+svgName+" (docs to publish them)")
	fs.IntVar(&o.floorN, "floor-n", 2000, "floor: calls per operation, hot and paced each")
	fs.IntVar(&o.acquireN, "acquire-n", 500, "uncontended acquire/release cycles per subject")
	fs.IntVar(&o.renewN, "renew-n", 500, "renewals per subject")
	fs.IntVar(&o.blocks, "blocks", 10, "interleaving: iterations are split into this many blocks, each visiting every subject in a rotated order")
	fs.DurationVar(&o.hold, "hold", 2*time.Millisecond, "idle gap before each paced floor call, acquire, release and renewal")
	fs.IntVar(&o.handoverN, "handover-n", 40, "clean handover trials per subject")
	fs.IntVar(&o.handoverPar, "handover-par", 5, "handover trials of one subject run at once")
	fs.IntVar(&o.failoverN, "failover-n", 8, "crash failover trials per subject (all run at once)")
	fs.IntVar(&o.many, "many", 1000, "idle load: leases held by the second participant")
	fs.DurationVar(&o.loadWindow, "load-window", 60*time.Second, "idle load: measurement window")
	churnClients := fs.String("churn-clients", "2,8", "churn: client counts")
	fs.DurationVar(&o.churnDur, "churn-dur", 10*time.Second, "churn: time per subject and client count")
	fs.IntVar(&o.churnRounds, "churn-rounds", 2, "churn: rounds the time is split into (subject order rotates)")
	fs.IntVar(&o.scaleN, "scale-n", 10000, "scale: leases one tenure client holds on PostgreSQL (100000 for the issue's target)")
	scaleClients := fs.String("scale-clients", "1", "scale: client counts, one scale run each; a run's leases are spread over its clients, which share one store (1,1000 with -scale-n 100000 for the issue's two targets)")
	fs.IntVar(&o.scaleConc, "scale-conc", 1000, "scale: Acquire calls in flight (the client sends those due together in one batch)")
	fs.DurationVar(&o.scaleTTL, "scale-ttl", 30*time.Second, "scale: TTL (renew rounds every TTL/3)")
	fs.DurationVar(&o.scaleWindow, "scale-window", 40*time.Second, "scale: time the renewal rounds are watched")
	fs.DurationVar(&o.scaleLimit, "scale-limit", 120*time.Second, "scale: give up acquiring after this long")
	fs.IntVar(&o.consulRecords, "consul-records", 10000, "consul: released lease records left under tenure's prefix before the phases run (a prefix that has served that many leases)")
	fs.IntVar(&o.tokenTrials, "token-trials", 5, "token: rounds of timing Lease.Token and time.Now (about 2 s each)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
	fs.BoolVar(&o.quick, "quick", false, "smoke run of about a minute: TTL 3s only, tiny sample sizes (the numbers mean nothing)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: every setting is a flag (see -h)", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		// Quick sizes, unless a flag was given explicitly.
		quick := map[string]string{"ttls": "3s", "floor-n": "100", "acquire-n": "20", "renew-n": "20", "blocks": "2",
			"handover-n": "3", "handover-par": "3", "failover-n": "1", "many": "20", "load-window": "2s",
			"churn-dur": "1s", "churn-rounds": "1", "scale-n": "200", "scale-clients": "1,4", "scale-conc": "16", "scale-ttl": "3s", "scale-window": "2500ms", "scale-limit": "20s", "token-trials": "1", "consul-records": "20"}
		for name, v := range quick {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return nil, err
				}
			}
		}
	}
	var err error
	if o.profiles, err = parseProfiles(*ttls); err != nil {
		return nil, err
	}
	o.stores, o.subjects, o.phases = splitList(*stores), splitList(*subjects), splitList(*phases)
	for _, st := range o.stores {
		if !slices.Contains([]string{"postgres", "redis", "etcd", "consul", "sqlite"}, st) {
			return nil, fmt.Errorf("-stores: unknown store %q; choose from postgres, redis, etcd, consul, sqlite", st)
		}
	}
	for _, ph := range o.phases {
		if !slices.Contains(allPhases, ph) {
			return nil, fmt.Errorf("-phases: unknown phase %q; choose from %s", ph, strings.Join(allPhases, ","))
		}
	}
	if o.churnClients, err = positiveCounts("churn-clients", *churnClients); err != nil {
		return nil, err
	}
	if o.scaleClients, err = positiveCounts("scale-clients", *scaleClients); err != nil {
		return nil, err
	}
	for name, v := range map[string]int{"floor-n": o.floorN, "acquire-n": o.acquireN, "renew-n": o.renewN, "blocks": o.blocks,
		"handover-n": o.handoverN, "handover-par": o.handoverPar, "failover-n": o.failoverN, "churn-rounds": o.churnRounds, "scale-n": o.scaleN, "scale-conc": o.scaleConc, "token-trials": o.tokenTrials} {
		if v < 1 {
			return nil, fmt.Errorf("-%s must be at least 1 (got %d)", name, v)
		}
	}
	if o.hold < 0 || o.loadWindow <= 0 || o.churnDur <= 0 || o.scaleWindow <= 0 || o.scaleLimit <= 0 {
		return nil, errors.New("-hold may not be negative, and -load-window, -churn-dur, -scale-window and -scale-limit must be positive")
	}
	if o.consulRecords < 0 {
		return nil, fmt.Errorf("-consul-records may not be negative (got %d)", o.consulRecords)
	}
	if o.consulMinTTL <= 0 {
		return nil, fmt.Errorf("-consul-session-ttl-min must be positive (got %s)", o.consulMinTTL)
	}
	for _, n := range o.scaleClients {
		if n > o.scaleN {
			return nil, fmt.Errorf("-scale-clients %d is more than -scale-n %d: every client must hold a lease", n, o.scaleN)
		}
	}
	if o.scaleTTL < time.Second {
		return nil, fmt.Errorf("-scale-ttl must be at least 1s (got %s)", o.scaleTTL)
	}
	u, err := url.Parse(o.pgURL)
	if err != nil {
		return nil, fmt.Errorf("-pg: %w", err)
	}
	if m := u.Query().Get("sslmode"); m != "disable" {
		return nil, fmt.Errorf("-pg %q: add sslmode=disable; requests are counted on the plaintext wire (got sslmode %q)", o.pgURL, m)
	}
	return o, nil
}

func profileNames(ps []profile) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.name)
	}
	return out
}

// positiveCounts parses the comma-separated list s of flag name, each a
// positive number.
func positiveCounts(name, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s: %q is not a positive number", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func run(ctx context.Context, args []string, log io.Writer) error {
	o, err := parseFlags(args, log)
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	phase := map[string]bool{}
	for _, p := range o.phases {
		phase[p] = true
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	tmp, err := os.MkdirTemp("", "tenure-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	e := &env{pgURL: o.pgURL, redisAddr: o.redisAddr, tmpDir: tmp, runID: hex.EncodeToString(id[:])}
	rep := &report{RunID: e.runID, Started: time.Now(), Command: "go run . " + strings.Join(args, " "), Tenure: tenureVersion(),
		Host: hostInfo(), Quick: o.quick, FloorDesc: map[string]string{},
		Params: map[string]any{"hold": o.hold.String(), "floor_n": o.floorN, "acquire_n": o.acquireN, "renew_n": o.renewN, "blocks": o.blocks,
			"handover_n": o.handoverN, "failover_n": o.failoverN, "many": o.many, "load_window": o.loadWindow.String(),
			"churn_clients": o.churnClients, "churn_dur": o.churnDur.String(), "scale_n": o.scaleN, "scale_clients": o.scaleClients, "consul_records": o.consulRecords, "ttls": profileNames(o.profiles)}}
	rep.Host["loadavg_start"] = loadavg()
	logf := func(format string, args ...any) {
		fmt.Fprintf(log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}

	if slices.Contains(o.stores, "etcd") {
		if o.etcdURL != "" {
			e.etcd = []string{o.etcdURL}
		} else {
			srv, err := etcdserver.StartEtcd(ctx, etcdserver.EtcdConfig{Fsync: true})
			if err != nil {
				return fmt.Errorf("start etcd (set TENURE_ETCD_BIN, build it with tools/servers/ensure.sh etcd, or pass -etcd URL, or leave etcd out of -stores): %w", err)
			}
			defer srv.Stop()
			e.etcd = []string{srv.Endpoint}
			rep.Notes = append(rep.Notes, "etcd: a single-member server started by the program, fsync on, data in a temporary directory")
		}
	}

	if slices.Contains(o.stores, "consul") {
		if o.consulAddr != "" {
			e.consul, e.consulMinTTL = o.consulAddr, o.consulMinTTL
		} else {
			srv, err := consulserver.StartConsul(ctx, consulserver.ConsulConfig{Server: true})
			if err != nil {
				return fmt.Errorf("start a Consul agent (set TENURE_CONSUL_BIN, build it with tools/consul/ensure.sh, or pass -consul ADDR, or leave consul out of -stores): %w", err)
			}
			defer srv.Stop()
			e.consul, e.consulMinTTL = srv.HTTPAddr, consulserver.ConsulSessionTTLMin
			rep.Notes = append(rep.Notes, fmt.Sprintf("consul: a single server agent started by the program, Raft log on disk, session_ttl_min %s", consulserver.ConsulSessionTTLMin))
		}
	}

	subs, err := buildSubjects(ctx, e, o)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, s := range subs {
			s.impl.close(cctx)
		}
	}()
	rep.Subjects = subs
	logf("run %s: %d subjects, stores %s, phases %s", e.runID, len(subs), strings.Join(o.stores, ","), strings.Join(o.phases, ","))
	if o.consulRecords > 0 {
		for _, s := range subs {
			if ti, ok := s.impl.(*tenureImpl); ok && s.Store == "consul" {
				t0 := time.Now()
				if err := consulFill(ctx, ti.be, e, o.consulRecords); err != nil {
					return fmt.Errorf("consul: leaving %d records under %s's prefix: %w", o.consulRecords, s.id(), err)
				}
				logf("%s: %d records left under its prefix in %s", s.id(), o.consulRecords, time.Since(t0).Round(time.Millisecond))
			}
		}
		if slices.Contains(o.stores, "consul") {
			rep.Notes = append(rep.Notes, fmt.Sprintf("consul: tenure's prefixes held %d released lease records before the phases ran (-consul-records)", o.consulRecords))
		}
	}

	// timed runs f, the phases named, if any of them was asked for.
	timed := func(name string, f func()) {
		if !slices.ContainsFunc(strings.Split(name, "+"), func(p string) bool { return phase[p] }) || ctx.Err() != nil {
			return
		}
		t0 := time.Now()
		logf("%s ...", name)
		f()
		logf("%s done in %s", name, time.Since(t0).Round(time.Millisecond))
	}
	timed("floor", func() {
		ops, closeOps, err := floorOps(ctx, e, o.stores)
		if err != nil {
			rep.Notes = append(rep.Notes, "floors not measured: "+err.Error())
			return
		}
		defer closeOps()
		var errs []string
		rep.Floors, errs = phaseFloors(ctx, ops, o.floorN, o.blocks, o.hold)
		rep.Notes = append(rep.Notes, errs...)
		for _, op := range ops {
			if rep.FloorDesc[op.store] != "" {
				rep.FloorDesc[op.store] += ", "
			}
			rep.FloorDesc[op.store] += op.desc
		}
	})
	timed("uncontended", func() { phaseUncontended(ctx, e, subs, o.acquireN, o.blocks, o.hold) })
	timed("renew", func() { phaseRenew(ctx, e, subs, o.renewN, o.blocks, o.hold) })
	timed("handover", func() { phaseHandover(ctx, e, subs, o.handoverN, o.handoverPar) })
	// Failover and idle load are mostly waiting: they run side by side.
	timed("failover+load", func() {
		var wg sync.WaitGroup
		if phase["failover"] {
			var crashable []*subject
			for _, s := range subs {
				if s.Profile != "default" {
					crashable = append(crashable, s)
				}
			}
			phaseFailover(ctx, e, crashable, o.failoverN, &wg)
		}
		if phase["load"] {
			first := o.profiles[0].name
			var loaded []*subject
			for _, s := range subs {
				if s.Profile == first {
					loaded = append(loaded, s)
				}
			}
			phaseLoad(ctx, e, loaded, o.many, 2*time.Second, o.loadWindow, &wg)
		}
		wg.Wait()
	})
	timed("churn", func() { phaseChurn(ctx, e, subs, o.churnClients, o.churnDur, o.churnRounds) })
	timed("scale", func() {
		if !slices.Contains(o.stores, "postgres") || !wants(o.subjects, "tenure") {
			return
		}
		be, err := tenurePG(ctx, e)
		if err != nil {
			rep.Notes = append(rep.Notes, "scale not measured: "+err.Error())
			return
		}
		for _, n := range o.scaleClients {
			rep.Scale = append(rep.Scale, phaseScale(ctx, be, e, o.scaleN, n, o.scaleConc, o.scaleTTL, o.scaleWindow, o.scaleLimit))
		}
	})
	timed("token", func() {
		var err error
		if rep.Token, err = phaseToken(ctx, o.tokenTrials); err != nil {
			rep.Notes = append(rep.Notes, "token not measured: "+err.Error())
		}
	})
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	for _, s := range subs {
		s.Result.summarise()
	}
	rep.Finished = time.Now()
	rep.Host["loadavg_end"] = loadavg()
	return writeOutputs(rep, o.outDir, log)
}

func writeOutputs(rep *report, dir string, log io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	md := rep.markdown(svgName)
	for name, data := range map[string][]byte{jsonName: js, mdName: []byte(md), svgName: rep.svg()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "\n%s\nwrote %s, %s and %s in %s\n", md, mdName, jsonName, svgName, dir)
	return nil
}

func wants(list []string, name string) bool {
	return slices.Contains(list, "all") || slices.Contains(list, name)
}

// buildSubjects makes every subject the flags ask for, in report order:
// per store, tenure first, then its anchors; per subject, each profile.
func buildSubjects(ctx context.Context, e *env, o *options) ([]*subject, error) {
	var subs []*subject
	add := func(s *subject, err error) error {
		if err != nil {
			return err
		}
		s.Result = &result{}
		subs = append(subs, s)
		return nil
	}
	for _, st := range o.stores {
		var be *tenureBackend
		var err error
		switch st {
		case "postgres":
			be, err = tenurePG(ctx, e)
		case "redis":
			be, err = tenureRedis(ctx, e)
		case "etcd":
			be, err = tenureEtcd(ctx, e)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w (leave it out with -stores)", st, err)
		}
		for _, p := range o.profiles {
			if wants(o.subjects, "tenure") {
				b := be
				switch st {
				case "sqlite":
					b = tenureSQLite(e, p.name)
				case "consul":
					b = tenureConsul(e, p)
				}
				if err := add(newTenureSubject(b, p), nil); err != nil {
					return nil, err
				}
			}
			var errs []error
			switch st {
			case "postgres":
				if wants(o.subjects, "pglock") {
					errs = append(errs, add(newPglockSubject(ctx, e, p)))
				}
			case "redis":
				for _, n := range []string{"redsync", "redislock"} {
					if wants(o.subjects, n) {
						errs = append(errs, add(newRedisSubject(ctx, e, p, n)))
					}
				}
			case "consul":
				if wants(o.subjects, "consul-lock") {
					errs = append(errs, add(newConsulLockSubject(e, p), nil))
				}
			case "etcd":
				for _, el := range []bool{false, true} {
					if wants(o.subjects, map[bool]string{false: "etcd-mutex", true: "etcd-election"}[el]) {
						errs = append(errs, add(newEtcdSubject(ctx, e, p, el)))
					}
				}
			}
			if err := errors.Join(errs...); err != nil {
				return nil, fmt.Errorf("%s: %w", st, err)
			}
		}
	}
	if len(subs) == 0 {
		return nil, errors.New("no subject to measure: check -stores and -subjects")
	}
	return subs, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func hostInfo() map[string]string {
	h := map[string]string{"go": runtime.Version(), "cpus": strconv.Itoa(runtime.NumCPU()), "cpu": "unknown cpu"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}

// tenureVersion names the commit of the checkout the replace directive
// points at, and says when its work tree has changes.
func tenureVersion() string {
	out, err := exec.Command("git", "-C", "..", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "(commit unknown: run from bench/ inside a git checkout)"
	}
	v := "@" + strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		v += " with uncommitted changes"
	}
	return v
}
