package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// EnvControl names, in a tenure run command's environment, the unix socket
// on which that tenure run takes requests from its own command: `tenure
// release` without --force, run inside the command with the command's own
// TENURE_HOLDER and TENURE_TOKEN, asks tenure run to release, so that the
// end of the tenure is the command's doing and not a loss; `tenure
// progress` reports progress to the progress gate; `tenure
// revoke-inherited` asks it to revoke.
const EnvControl = "TENURE_RUN_CONTROL"

// controlTimeout bounds one exchange on the control socket.
const controlTimeout = 10 * time.Second

// The operations of the control socket besides "release".
const (
	opProgress = "progress"
	opRevoke   = "revoke"
)

// controlRequest is what `tenure release`, `tenure progress` and `tenure
// revoke-inherited` send on the control socket.
type controlRequest struct {
	Op     string `json:"op"` // "release", "progress" or "revoke"
	Lease  string `json:"lease"`
	Holder string `json:"holder"`
	Token  int64  `json:"token"`
}

// controlReply is tenure run's answer. Fallback: the request is not for
// this tenure run's live tenure; release at the store directly. NotHeld:
// progress was not recorded, the tenure is over. Revoked: the tenure is
// revoked now (false when it already was).
type controlReply struct {
	Released bool   `json:"released,omitempty"`
	NotHeld  bool   `json:"not_held,omitempty"`
	Revoked  bool   `json:"revoked,omitempty"`
	Token    int64  `json:"token,omitempty"`
	Fallback bool   `json:"fallback,omitempty"`
	Error    string `json:"error,omitempty"`
}

// controlCall is one request handed to run's supervising loop, which
// answers on reply.
type controlCall struct {
	req   controlRequest
	reply chan controlReply
}

// control is run's end of the control socket.
type control struct {
	dir   string
	ln    *net.UnixListener
	calls chan controlCall
	stop  chan struct{}
	wg    sync.WaitGroup
}

// listenControl makes the socket in a private directory of its own.
func listenControl() (*control, error) {
	dir, err := os.MkdirTemp("", "tenure-run-")
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "control"), Net: "unix"})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c := &control{dir: dir, ln: ln, calls: make(chan controlCall), stop: make(chan struct{})}
	c.wg.Go(c.accept)
	return c, nil
}

// path is the socket's path, for the command's environment.
func (c *control) path() string { return filepath.Join(c.dir, "control") }

func (c *control) accept() {
	for {
		conn, err := c.ln.AcceptUnix()
		if err != nil {
			return // closed
		}
		c.wg.Go(func() { c.serve(conn) })
	}
}

func (c *control) serve(conn *net.UnixConn) {
	defer func() { _ = conn.Close() }() // One exchange per connection.
	_ = conn.SetDeadline(time.Now().Add(controlTimeout))
	var req controlRequest
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&req); err != nil {
		return
	}
	call := controlCall{req: req, reply: make(chan controlReply, 1)}
	var rep controlReply
	select {
	case c.calls <- call:
		select {
		case rep = <-call.reply:
		case <-c.stop:
			rep = controlReply{Fallback: true}
		}
	case <-c.stop:
		rep = controlReply{Fallback: true}
	}
	_ = json.NewEncoder(conn).Encode(rep) // A caller that went away: nothing to tell.
}

// close stops taking requests, ends every exchange and removes the socket.
func (c *control) close() {
	close(c.stop)
	_ = c.ln.Close()
	c.wg.Wait()
	_ = os.RemoveAll(c.dir)
}

// askControl sends req to the tenure run whose control socket is path and
// returns its reply.
func askControl(path string, req controlRequest) (controlReply, error) {
	conn, err := net.DialTimeout("unix", path, controlTimeout)
	if err != nil {
		return controlReply{}, err
	}
	defer func() { _ = conn.Close() }() // One exchange per connection.
	_ = conn.SetDeadline(time.Now().Add(controlTimeout))
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return controlReply{}, err
	}
	var rep controlReply
	if err := json.NewDecoder(conn).Decode(&rep); err != nil {
		return controlReply{}, fmt.Errorf("no answer from tenure run on %s: %w", path, err)
	}
	if rep.Error != "" {
		return rep, errors.New(rep.Error)
	}
	return rep, nil
}
