package faultnet_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/faultnet"
	"github.com/tenure-dev/tenure/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// quiet is how long a test listens to make sure nothing arrives. Absence can
// only be observed for a bounded time; nothing waits on it for an event.
const quiet = 150 * time.Millisecond

// patience bounds every wait for something that must happen.
const patience = 10 * time.Second

// echoServer answers every line with the same line, until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	return recordingServer(t, nil)
}

// recordingServer is echoServer that also sends every line it receives to
// seen, when seen is not nil.
func recordingServer(t *testing.T, seen chan<- string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return // Either side closed.
					}
					if seen != nil {
						seen <- line
					}
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T, target string) *faultnet.Proxy {
	t.Helper()
	p, err := faultnet.Listen(target)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

// newEchoProxy starts a proxy in front of an echo server.
func newEchoProxy(t *testing.T) *faultnet.Proxy {
	t.Helper()
	return newProxy(t, echoServer(t))
}

// echoProxyWithClient starts a proxy in front of an echo server and dials
// one client through it.
func echoProxyWithClient(t *testing.T) (*faultnet.Proxy, *client) {
	t.Helper()
	p := newEchoProxy(t)
	return p, dial(t, p)
}

func dial(t *testing.T, p *faultnet.Proxy) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), patience)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &client{t: t, conn: c, r: bufio.NewReader(c)}
}

func (c *client) send(line string) {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetWriteDeadline(time.Now().Add(patience)))
	_, err := io.WriteString(c.conn, line+"\n")
	require.NoError(c.t, err)
}

// expect reads the next line, waiting up to patience.
func (c *client) expect(line string) {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(patience)))
	got, err := c.r.ReadString('\n')
	require.NoError(c.t, err)
	require.Equal(c.t, line+"\n", got)
}

// echo sends line and expects it back.
func (c *client) echo(line string) {
	c.t.Helper()
	c.send(line)
	c.expect(line)
}

// expectNothing checks that nothing arrives for a while.
func (c *client) expectNothing() {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(quiet)))
	got, err := c.r.ReadString('\n')
	require.ErrorIs(c.t, err, os.ErrDeadlineExceeded, "received %q", got)
}

// expectClosed waits for the proxy to close the connection.
func (c *client) expectClosed() {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(patience)))
	_, err := c.r.ReadString('\n')
	require.Error(c.t, err)
	require.NotErrorIs(c.t, err, os.ErrDeadlineExceeded)
}

func TestProxy(t *testing.T) {
	t.Parallel()

	t.Run("Forwards", func(t *testing.T) {
		t.Parallel()
		p, c := echoProxyWithClient(t)
		c.echo("hello")
		require.Equal(t, 1, p.Conns())
		require.EqualValues(t, 1, p.Accepted())
	})

	t.Run("BlackHoleHoldsOldAndNewConnectionsUntilRestore", func(t *testing.T) {
		t.Parallel()
		p, old := echoProxyWithClient(t)
		old.echo("before")

		p.BlackHole()
		old.send("during")
		old.expectNothing()
		fresh := dial(t, p)
		fresh.send("new")
		fresh.expectNothing()

		p.Restore()
		old.expect("during")
		fresh.expect("new")
		old.echo("after")
	})

	t.Run("CutClosesOpenConnectionsOnly", func(t *testing.T) {
		t.Parallel()
		p, old := echoProxyWithClient(t)
		old.echo("x")

		p.Cut()
		old.expectClosed()
		fresh := dial(t, p)
		fresh.echo("y")
	})

	t.Run("CutWhileBlackHoled", func(t *testing.T) {
		t.Parallel()
		p, c := echoProxyWithClient(t)
		c.echo("x") // the proxy has accepted it
		p.BlackHole()
		c.send("held")
		p.Cut()
		c.expectClosed()
	})

	t.Run("RefuseClosesNewConnectionsUntilRestore", func(t *testing.T) {
		t.Parallel()
		p, old := echoProxyWithClient(t)
		old.echo("a")

		p.Refuse()
		refused := dial(t, p)
		refused.expectClosed()
		old.echo("b")

		p.Restore()
		fresh := dial(t, p)
		fresh.echo("c")
	})

	t.Run("Delay", func(t *testing.T) {
		t.Parallel()
		const d = 100 * time.Millisecond
		p, c := echoProxyWithClient(t)
		p.SetDelay(d)
		start := time.Now()
		c.echo("slow")
		// Held once on the way there and once on the way back.
		require.GreaterOrEqual(t, time.Since(start), 2*d)

		p.SetDelay(-time.Second)
		c.echo("fast")
	})

	t.Run("LoseRepliesDropsTheReplyAfterTheServerGotTheRequest", func(t *testing.T) {
		t.Parallel()
		seen := make(chan string, 4)
		p := newProxy(t, recordingServer(t, seen))
		armed := dial(t, p)
		armed.echo("before")
		require.Equal(t, "before\n", <-seen)

		p.LoseReplies()
		fresh := dial(t, p) // opened after: not armed
		armed.send("commit")
		select {
		case got := <-seen:
			require.Equal(t, "commit\n", got, "the request must reach the server")
		case <-time.After(patience):
			t.Fatal("the request never reached the server")
		}
		armed.expectClosed()
		require.EqualValues(t, 1, p.RepliesLost())

		fresh.echo("unaffected")
		require.Equal(t, "unaffected\n", <-seen)
		require.EqualValues(t, 1, p.RepliesLost())
	})

	t.Run("HalfClosePropagates", func(t *testing.T) {
		t.Parallel()
		_, c := echoProxyWithClient(t)
		c.send("last")
		tcp, ok := c.conn.(*net.TCPConn)
		require.True(t, ok)
		require.NoError(t, tcp.CloseWrite())
		c.expect("last")
		require.NoError(t, c.conn.SetReadDeadline(time.Now().Add(patience)))
		_, err := c.r.ReadByte()
		require.ErrorIs(t, err, io.EOF)
	})

	t.Run("UnreachableTargetClosesClient", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		target := ln.Addr().String()
		require.NoError(t, ln.Close())
		p := newProxy(t, target)
		require.Equal(t, target, p.Target())
		c := dial(t, p)
		c.expectClosed()
	})

	t.Run("RetargetMovesNewConnectionsOnly", func(t *testing.T) {
		t.Parallel()
		seenA, seenB := make(chan string, 4), make(chan string, 4)
		a, b := recordingServer(t, seenA), recordingServer(t, seenB)
		p := newProxy(t, a)
		before := dial(t, p)
		before.echo("to a")
		require.Equal(t, "to a\n", <-seenA)

		require.Error(t, p.Retarget("no port"))
		require.Equal(t, a, p.Target(), "a refused target changes nothing")
		require.NoError(t, p.Retarget(b))
		require.Equal(t, b, p.Target())
		after := dial(t, p)
		after.echo("to b")
		require.Equal(t, "to b\n", <-seenB)
		before.echo("still a")
		require.Equal(t, "still a\n", <-seenA)
	})

	t.Run("CloseEndsEverything", func(t *testing.T) {
		t.Parallel()
		p, err := faultnet.Listen(echoServer(t))
		require.NoError(t, err)
		c := dial(t, p)
		c.echo("x")
		p.BlackHole()
		c.send("held")
		require.NoError(t, p.Close())
		require.NoError(t, p.Close())
		c.expectClosed()
		_, err = net.DialTimeout("tcp", p.Addr(), patience)
		require.Error(t, err)
		require.Equal(t, 0, p.Conns())
	})

	t.Run("BadTarget", func(t *testing.T) {
		t.Parallel()
		_, err := faultnet.Listen("no-port")
		require.Error(t, err)
		require.Contains(t, err.Error(), "faultnet: ")
		require.False(t, errors.Is(err, os.ErrDeadlineExceeded))
	})
}
