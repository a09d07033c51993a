package etcdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// BinaryEnv is the environment variable that names the etcd binary.
const BinaryEnv = "TENURE_ETCD_BIN"

const (
	// startTimeout bounds how long [Start] waits for a server to answer.
	startTimeout = 30 * time.Second
	// probeTimeout bounds one readiness probe.
	probeTimeout = 500 * time.Millisecond
	// startAttempts is how often Start tries new ports when a server
	// dies before it answers (another process took a port first).
	startAttempts = 3
)

// Server is an etcd server this process started.
type Server struct {
	// Name is the server's member name, unique to it.
	Name string
	// Endpoint is the client URL, http://127.0.0.1:port.
	Endpoint string

	bin  string
	dir  string // the data directory and the log
	args []string
	cmd  *exec.Cmd
	log  *os.File
}

// Binary returns the etcd binary named by TENURE_ETCD_BIN, or etcd on
// PATH.
func Binary() (string, error) {
	if bin := os.Getenv(BinaryEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("etcdtest: %s names %q: %w; build it with tools/etcd/ensure.sh", BinaryEnv, bin, err)
		}
		return bin, nil
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("etcdtest: no etcd binary: set %s=$(tools/etcd/ensure.sh) or put etcd on PATH: %w", BinaryEnv, err)
	}
	return bin, nil
}

// Start starts a single-member etcd server on free loopback ports, with a
// fresh data directory and fsync off (it holds test data only), and
// returns once it answers as itself. Stop it with [Server.Stop].
func Start(ctx context.Context) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var errs []error
	for range startAttempts {
		s, err := start(ctx, bin)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func start(ctx context.Context, bin string) (*Server, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tenure-etcd-")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: make a data directory: %w", err)
	}
	name := "tenure-test-" + randomHex(6)
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s := &Server{
		Name:     name,
		Endpoint: client,
		bin:      bin,
		dir:      dir,
		args: []string{
			"--name", name,
			"--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", name + "=" + peer,
			"--initial-cluster-token", name,
			"--initial-cluster-state", "new",
			"--unsafe-no-fsync",
			"--log-level", "warn",
		},
	}
	if err := s.launch(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// launch starts the process and waits until it answers as s.Name.
func (s *Server) launch(ctx context.Context) error {
	log, err := os.OpenFile(filepath.Join(s.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("etcdtest: open the server log: %w", err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := startProcess(cmd); err != nil {
		_ = log.Close()
		return fmt.Errorf("etcdtest: start %s: %w", s.bin, err)
	}
	s.cmd, s.log = cmd, log
	if err := s.waitReady(ctx); err != nil {
		_ = s.kill()
		return fmt.Errorf("%w; server log:\n%s", err, s.logTail())
	}
	return nil
}

// waitReady probes the server until it lists a member named s.Name, the
// process exits, or the start timeout passes.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cli, err := s.newClient()
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	for {
		if exited, err := s.exited(); exited || err != nil {
			return fmt.Errorf("etcdtest: server %s exited before it answered (%v)", s.Name, err)
		}
		probe, cancelProbe := context.WithTimeout(ctx, probeTimeout)
		resp, err := cli.MemberList(probe)
		cancelProbe()
		if err == nil {
			if slices.ContainsFunc(resp.Members, func(m *etcdserverpb.Member) bool {
				return m.Name == s.Name && slices.Contains(m.ClientURLs, s.Endpoint)
			}) {
				return nil
			}
			return fmt.Errorf("etcdtest: the server on %s is not %s, the one this test started: members %v", s.Endpoint, s.Name, resp.Members)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("etcdtest: server %s did not answer on %s within %s: %w", s.Name, s.Endpoint, startTimeout, err)
		}
	}
}

// exited reports whether the process has ended, reaping it if so.
func (s *Server) exited() (bool, error) {
	var ws syscall.WaitStatus
	pid, err := syscall.Wait4(s.cmd.Process.Pid, &ws, syscall.WNOHANG, nil)
	if err != nil {
		return true, err
	}
	if pid == 0 {
		return false, nil
	}
	s.cmd = nil
	if ws.Signaled() {
		return true, fmt.Errorf("killed by %s", ws.Signal())
	}
	return true, fmt.Errorf("exit status %d", ws.ExitStatus())
}

// kill ends the process, if it runs, and waits for it.
func (s *Server) kill() error {
	var err error
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		var ws syscall.WaitStatus
		_, err = syscall.Wait4(s.cmd.Process.Pid, &ws, 0, nil)
		s.cmd = nil
	}
	if s.log != nil {
		err = errors.Join(err, s.log.Close())
		s.log = nil
	}
	return err
}

// Stop kills the server and removes its data directory.
func (s *Server) Stop() error {
	err := s.kill()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// Kill kills the server and keeps its data directory, so that
// [Server.Restart] can start it again with its data.
func (s *Server) Kill() error { return s.kill() }

// Restart starts a killed server again on the same ports with the same
// data, and returns once it answers.
func (s *Server) Restart(ctx context.Context) error {
	if s.cmd != nil {
		return fmt.Errorf("etcdtest: restart of server %s, which is running; Kill it first", s.Name)
	}
	return s.launch(ctx)
}

// Client returns a new client of the server, closed when tb ends.
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := s.newClient()
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

func (s *Server) newClient() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Endpoint},
		DialTimeout: startTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdtest: client for %s: %w", s.Endpoint, err)
	}
	return cli, nil
}

// logTail returns the end of the server's log.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "etcd.log"))
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	const maxTail = 4096
	if len(b) > maxTail {
		b = b[len(b)-maxTail:]
	}
	return strings.TrimSpace(string(b))
}

// freePorts asks the kernel for n free loopback ports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: find a free port: %w", err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		// Keep it open until all n are chosen, so that they differ.
		defer func() { _ = l.Close() }()
	}
	return ports, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails; it crashes the program instead.
	return hex.EncodeToString(b)
}
