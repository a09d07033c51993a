package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// counter counts the requests one participant sends to its store, on that
// participant's own connections, so other users of a shared server do not
// disturb it: SQL statements (simple Query and extended-protocol Execute
// messages), Redis commands (pub/sub and connection setup included), etcd
// gRPC messages (unary calls and every message sent on a stream, such as a
// lease keep-alive), Consul HTTP requests, and for SQLite, which has no
// wire, store calls.
// A nil *counter counts nothing.
type counter struct{ n atomic.Int64 }

func (c *counter) add(n int64) {
	if c != nil {
		c.n.Add(n)
	}
}

func (c *counter) load() int64 {
	if c == nil {
		return 0
	}
	return c.n.Load()
}

// countingDialer dials TCP and wraps each connection so that what the
// client writes is scanned for requests.
func countingDialer(c *counter, scanner func() func([]byte) int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil || c == nil {
			return conn, err
		}
		return &countConn{Conn: conn, c: c, scan: scanner()}, nil
	}
}

type countConn struct {
	net.Conn
	c    *counter
	mu   sync.Mutex
	scan func([]byte) int64
}

func (cc *countConn) Write(b []byte) (int, error) {
	cc.mu.Lock()
	cc.c.add(cc.scan(b))
	cc.mu.Unlock()
	return cc.Conn.Write(b)
}

// pgScanner follows the PostgreSQL frontend protocol (plaintext only,
// hence sslmode=disable) and counts Query and Execute messages.
func pgScanner() func([]byte) int64 {
	var (
		started bool
		hdr     [8]byte
		nhdr    int
		skip    int
	)
	return func(b []byte) int64 {
		var n int64
		for len(b) > 0 {
			if skip > 0 {
				k := min(skip, len(b))
				skip -= k
				b = b[k:]
				continue
			}
			need := 5 // type byte and length
			if !started {
				need = 8 // length and protocol code, no type byte
			}
			k := copy(hdr[nhdr:need], b)
			nhdr += k
			b = b[k:]
			if nhdr < need {
				return n
			}
			nhdr = 0
			if !started {
				started = binary.BigEndian.Uint32(hdr[4:8]) == 196608 // protocol 3.0 startup
				skip = int(binary.BigEndian.Uint32(hdr[0:4])) - 8
				continue
			}
			if hdr[0] == 'Q' || hdr[0] == 'E' {
				n++
			}
			skip = int(binary.BigEndian.Uint32(hdr[1:5])) - 4
		}
		return n
	}
}

// respScanner counts the commands a Redis client writes: each top-level
// RESP array (or inline command) is one.
func respScanner() func([]byte) int64 {
	var (
		line  []byte
		elems int // bulk strings left in the current command
		skip  int // bulk payload bytes, CRLF included, left to skip
	)
	return func(b []byte) int64 {
		var n int64
		for len(b) > 0 {
			if skip > 0 {
				k := min(skip, len(b))
				skip -= k
				b = b[k:]
				continue
			}
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				line = append(line, b...)
				return n
			}
			l := bytes.TrimSuffix(append(line, b[:i]...), []byte("\r"))
			b = b[i+1:]
			switch {
			case len(l) == 0:
			case elems == 0 && l[0] == '*':
				n++
				elems, _ = strconv.Atoi(string(l[1:]))
			case elems == 0:
				n++ // inline command
			case l[0] == '$':
				k, _ := strconv.Atoi(string(l[1:]))
				skip = max(k, 0) + 2
				elems--
			}
			line = line[:0]
		}
		return n
	}
}

// grpcCounting counts every unary call and every message sent on a stream.
func grpcCounting(c *counter) []grpc.DialOption {
	if c == nil {
		return nil
	}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return s, err
		}
		return &countStream{ClientStream: s, c: c}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

type countStream struct {
	grpc.ClientStream
	c *counter
}

func (s *countStream) SendMsg(m any) error {
	s.c.add(1)
	return s.ClientStream.SendMsg(m)
}

// httpCounter is a Consul client's transport: it counts every HTTP request
// (a blocking query once, however long it waits), notes the last session
// renewal that succeeded, and after kill fails every request, as for a
// dead process.
type httpCounter struct {
	next      *http.Transport
	c         *counter
	dead      atomic.Bool
	lastRenew atomic.Int64 // UnixNano
}

func newHTTPCounter(c *counter) *httpCounter {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &httpCounter{next: t, c: c}
}

var errKilled = errors.New("bench: the participant crashed")

func (h *httpCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.dead.Load() {
		return nil, errKilled
	}
	h.c.add(1)
	resp, err := h.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusOK && r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/session/renew/") && !h.dead.Load() {
		h.lastRenew.Store(time.Now().UnixNano())
	}
	return resp, err
}

func (h *httpCounter) kill() {
	h.dead.Store(true)
	h.next.CloseIdleConnections()
}
