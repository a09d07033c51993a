package testserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const (
	// ClusterSize is the number of members of the clusters the servers'
	// helpers start: the smallest that keeps a quorum with one member
	// paused or down.
	ClusterSize = 3
	// LeaderProbeTimeout bounds each member's answer to a question about
	// the leader: a paused member never answers, and the time it is waited
	// for is the resolution of a watch for a new leader.
	LeaderProbeTimeout = 300 * time.Millisecond
	// DefaultReadyTimeout is how long [Start] waits for a server to answer
	// when [Config.ReadyTimeout] is zero.
	DefaultReadyTimeout = 60 * time.Second
	// ProbeInterval is how often readiness is asked, and how often the
	// servers' helpers poll for what they wait for.
	ProbeInterval = 50 * time.Millisecond
	// probeTimeout bounds one readiness probe.
	probeTimeout = 2 * time.Second
	// startAttempts is how often [OnFreePorts] tries.
	startAttempts = 3
	// logTailBytes is how much of a server's log an error quotes.
	logTailBytes = 4000
)

// ErrForeign is what a [Config.Ready] probe returns (wrapped) when the
// server answering is not the process [Start] started: another process
// owns the port. [Start] gives up at once on it.
var ErrForeign = errors.New("testserver: the server answering is not the one started")

// Config says how to run one server process.
type Config struct {
	// Name names the server in messages and its log file, Dir/Name.log:
	// "redis-server", "etcd", "consul".
	Name string
	// Bin is the binary, as [Binary] found it.
	Bin string
	// Args are the binary's arguments, the same at every (re)start. The
	// process runs in Dir.
	Args []string
	// Dir is the server's data directory, which the caller made (with
	// [os.MkdirTemp]). From the call to [Start] on the process owns it:
	// Start removes it when the start fails, [Process.Stop] removes it.
	Dir string
	// Ready returns nil once the server answers as itself, an error
	// wrapping [ErrForeign] when another server answers, and any other
	// error while it is not ready yet. Its ctx ends within a few seconds.
	Ready func(ctx context.Context) error
	// ReadyTimeout bounds each wait for Ready. Zero means
	// [DefaultReadyTimeout].
	ReadyTimeout time.Duration
	// Prepare, when set, adjusts the command before each start (to run it
	// as another user, for one: PostgreSQL refuses to run as root).
	Prepare func(cmd *exec.Cmd)
}

// Process is a server process [Start] started. Its methods are safe for
// concurrent use.
type Process struct {
	cfg Config

	mu  sync.Mutex
	run *run // nil while the server is down
}

// run is one run of the process.
type run struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has been waited for
	waitErr error         // set before exited is closed
}

// Start starts the server cfg describes and returns once cfg.Ready says it
// answers. When it does not, Start kills it, removes cfg.Dir and returns an
// error that quotes the end of its log.
func Start(ctx context.Context, cfg Config) (*Process, error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	p := &Process{cfg: cfg}
	if err := p.launch(ctx); err != nil {
		return nil, errors.Join(err, os.RemoveAll(cfg.Dir))
	}
	return p, nil
}

// Dir is the server's data directory.
func (p *Process) Dir() string { return p.cfg.Dir }

// Kill crashes the server (SIGKILL to its process group), waits until it
// has exited and keeps its data, so that [Process.Restart] can start it
// again. Killing a server that is down does nothing.
func (p *Process) Kill() {
	p.mu.Lock()
	r := p.run
	p.run = nil
	p.mu.Unlock()
	if r != nil {
		stop(r)
	}
}

// stop kills run r unless it has exited, and waits until it has.
func stop(r *run) {
	select {
	case <-r.exited:
		// Reaped already: its pid, and so its group's id, may name
		// another process by now, which must not be killed.
	default:
		kill(r.cmd)
	}
	<-r.exited
}

// Pause stops the server (SIGSTOP to its process group) without ending
// it: its sockets stay open and connections to it hang, as with a
// machine that froze. [Process.Resume] lets it go on; [Process.Kill]
// ends it paused or not. Pausing a server that is down does nothing.
func (p *Process) Pause() { p.signal(syscall.SIGSTOP) }

// Resume continues a server [Process.Pause] stopped.
func (p *Process) Resume() { p.signal(syscall.SIGCONT) }

// signal sends sig to the running server's process group, unless it has
// been reaped already (its pid may name another process by then).
func (p *Process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run == nil {
		return
	}
	select {
	case <-p.run.exited:
	default:
		signalGroup(p.run.cmd, sig)
	}
}

// Restart crashes the server if it runs and starts it again with the same
// arguments (so the same ports) and the same data, and returns once it
// answers.
func (p *Process) Restart(ctx context.Context) error {
	p.Kill()
	return p.launch(ctx)
}

// Stop kills the server and removes its data directory. Stopping twice is
// harmless.
func (p *Process) Stop() error {
	p.Kill()
	return os.RemoveAll(p.cfg.Dir)
}

// LogTail returns the end of the server's log, for error messages.
func (p *Process) LogTail() string {
	b, err := os.ReadFile(p.logPath())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(bytes.TrimSpace(b))
}

func (p *Process) logPath() string { return filepath.Join(p.cfg.Dir, p.cfg.Name+".log") }

// launch starts the process and waits until it is ready.
func (p *Process) launch(ctx context.Context) error {
	log, err := os.OpenFile(p.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testserver: %s log: %w", p.cfg.Name, err)
	}
	cmd := exec.Command(p.cfg.Bin, p.cfg.Args...)
	cmd.Dir = p.cfg.Dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if p.cfg.Prepare != nil {
		p.cfg.Prepare(cmd)
	}
	err = startProcess(cmd)
	_ = log.Close() // The process has its own descriptor.
	if err != nil {
		return fmt.Errorf("testserver: start %s: %w", p.cfg.Bin, err)
	}
	r := &run{cmd: cmd, exited: make(chan struct{})}
	go func() {
		r.waitErr = cmd.Wait()
		close(r.exited)
	}()
	p.mu.Lock()
	p.run = r
	p.mu.Unlock()
	if err := p.waitReady(ctx, r); err != nil {
		// End this launch's own run. A Kill may have taken it meanwhile,
		// and a restart after that put its own run in its place, which
		// must live on.
		p.mu.Lock()
		if p.run == r {
			p.run = nil
		}
		p.mu.Unlock()
		stop(r)
		return fmt.Errorf("testserver: %s (%s): %w; its log ends:\n%s", p.cfg.Name, p.cfg.Dir, err, p.LogTail())
	}
	return nil
}

// waitReady probes the server until it is ready, it exits, it turns out
// to be another server, or the ready timeout passes.
func (p *Process) waitReady(ctx context.Context, r *run) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(ProbeInterval)
	defer tick.Stop()
	for {
		probe, cancelProbe := context.WithTimeout(ctx, probeTimeout)
		err := p.cfg.Ready(probe)
		cancelProbe()
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrForeign) {
			return err
		}
		select {
		case <-r.exited:
			return fmt.Errorf("it exited (%v) before it was ready: %w", r.waitErr, err)
		case <-ctx.Done():
			return fmt.Errorf("not ready within %s: %w", p.cfg.ReadyTimeout, err)
		case <-tick.C:
		}
	}
}

// Binary returns the binary the environment variable env names, or name
// on PATH. Its error says how to get one: howTo, such as
// "$(tools/servers/ensure.sh etcd) builds one and prints its path".
func Binary(env, name, howTo string) (string, error) {
	if bin := os.Getenv(env); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("testserver: %s names %q: %w; %s", env, bin, err, howTo)
		}
		return bin, nil
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("testserver: no %s binary: set %s to one or put %s on PATH (%s): %w", name, env, name, howTo, err)
	}
	return bin, nil
}

// FreePorts returns n distinct loopback ports that were free for both TCP
// and UDP (Consul's Serf uses both) when asked.
func FreePorts(n int) ([]int, error) {
	var (
		ports   []int
		closers []func() error
	)
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testserver: find a free port: %w", err)
		}
		// Keep every listener open until all n are chosen, so that they differ.
		closers = append(closers, l.Close)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // Taken for UDP; the TCP listener keeps it from being offered again.
		}
		closers = append(closers, u.Close)
		ports = append(ports, port)
	}
	return ports, nil
}

// OnFreePorts calls start with n free loopback ports ([FreePorts]), and
// again with fresh ones while it fails, three times at most: another
// process may take a port between its choice and the server's bind. It
// returns the first success or every failure.
func OnFreePorts[T any](ctx context.Context, n int, start func(ports []int) (T, error)) (T, error) {
	var (
		zero T
		errs []error
	)
	for range startAttempts {
		ports, err := FreePorts(n)
		if err != nil {
			return zero, err
		}
		v, err := start(ports)
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return zero, errors.Join(errs...)
}
