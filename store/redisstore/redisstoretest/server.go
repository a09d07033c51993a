package redisstoretest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// startTimeout bounds how long a redis-server may take to say it is ready.
const startTimeout = 10 * time.Second

// startAttempts is how often a start is tried on a fresh port when the
// chosen one was taken meanwhile.
const startAttempts = 3

// readyLine is what redis-server logs once it accepts connections.
const readyLine = "Ready to accept connections"

// ServerConfig configures a [Server].
type ServerConfig struct {
	// AppendFsyncAlways runs the server with appendonly yes and appendfsync
	// always: every write is on disk before it is acknowledged, so a crash
	// loses nothing. Otherwise the server persists nothing at all (no RDB,
	// no AOF): a restart loses every key.
	AppendFsyncAlways bool
}

// Server is a redis-server child process on a free loopback port with a
// data directory of its own. It is killed when the test ends.
type Server struct {
	cfg  ServerConfig
	bin  string
	dir  string
	port int

	mu   sync.Mutex
	proc *process
}

// process is one run of redis-server.
type process struct {
	cmd    *exec.Cmd
	out    *watcher
	exited chan struct{} // closed when the process has exited
}

// StartServer starts a redis-server as cfg says and waits until it
// answers, as itself. The binary is TENURE_REDIS_BIN or redis-server on
// PATH; when there is none the test skips, or fails when CI is set.
func StartServer(tb testing.TB, cfg ServerConfig) *Server {
	tb.Helper()
	bin := os.Getenv("TENURE_REDIS_BIN")
	if bin == "" {
		var err error
		bin, err = exec.LookPath("redis-server")
		testutil.NeedServer(tb, "redis-server (install Debian's redis-server, or set TENURE_REDIS_BIN)", err)
	}
	s := &Server{cfg: cfg, bin: bin, dir: tb.TempDir()}
	tb.Cleanup(s.kill)
	var err error
	for range startAttempts {
		if s.port, err = freePort(); err != nil {
			tb.Fatalf("redisstoretest: find a free port: %v", err)
		}
		if err = s.start(); err == nil {
			return s
		}
	}
	tb.Fatalf("redisstoretest: start redis-server: %v", err)
	return nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Client returns a client on the server, closed when tb ends. It has
// ContextTimeoutEnabled set and reconnects by itself after a restart.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Restart crashes the server (SIGKILL) and starts it again on the same
// port and data directory. Without [ServerConfig.AppendFsyncAlways] every
// key is lost.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.kill()
	if err := s.start(); err != nil {
		tb.Fatalf("redisstoretest: restart redis-server on port %d: %v", s.port, err)
	}
}

// Stop crashes the server (SIGKILL) and leaves it down.
func (s *Server) Stop() { s.kill() }

func (s *Server) start() error {
	args := []string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--daemonize", "no", "--logfile", "", "--save", "",
	}
	if s.cfg.AppendFsyncAlways {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	cmd := exec.Command(s.bin, args...)
	out := &watcher{ready: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &process{cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // The exit status of a killed server says nothing.
		close(p.exited)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-out.ready:
	case <-p.exited:
		return fmt.Errorf("redis-server exited before it was ready:\n%s", out.String())
	case <-timer.C:
		s.kill()
		return fmt.Errorf("redis-server was not ready within %s:\n%s", startTimeout, out.String())
	}
	if err := s.verify(cmd.Process.Pid); err != nil {
		s.kill()
		return err
	}
	return nil
}

// verify checks that the server answering on the port is the process
// started, by its process id.
func (s *Server) verify(pid int) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("redis-server on %s does not answer: %w", s.Addr(), err)
	}
	fields := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			fields[k] = v
		}
	}
	if fields["process_id"] != strconv.Itoa(pid) || fields["tcp_port"] != strconv.Itoa(s.port) {
		return fmt.Errorf("the server answering on %s is process %s on port %s, not the one started (process %d)",
			s.Addr(), fields["process_id"], fields["tcp_port"], pid)
	}
	return nil
}

// kill ends the running process, if any, and waits until it has exited.
func (s *Server) kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill() // It may have exited already.
	<-p.exited
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("not a TCP address")
	}
	return addr.Port, nil
}

// watcher keeps a process's output and closes ready once the output shows
// [readyLine].
type watcher struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	seen  bool
}

func (w *watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.seen && bytes.Contains(w.buf.Bytes(), []byte(readyLine)) {
		w.seen = true
		close(w.ready)
	}
	return len(p), nil
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
