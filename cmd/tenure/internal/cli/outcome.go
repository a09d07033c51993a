package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenure-dev/tenure/store"
)

// How a tenure run ended, as run --json reports it in "ended".
const (
	endedExited      = "exited"       // the command ran and exited
	endedLost        = "lost"         // the lease was lost while the command ran
	endedHeld        = "held"         // held elsewhere, not acquired
	endedWaitTimeout = "wait_timeout" // --wait-timeout ran out
	endedInterrupted = "interrupted"  // a signal ended the wait
	endedError       = "error"        // anything else: see error
)

// runOutcome is the object run --json writes when run ends. The fields
// are documented in run's help; a field that does not apply is left out.
type runOutcome struct {
	Lease      string         `json:"lease"`
	Slot       *int           `json:"slot,omitempty"`
	Store      string         `json:"store,omitempty"`
	Holder     string         `json:"holder,omitempty"`
	Token      int64          `json:"token,omitempty"`
	AcquiredAt *time.Time     `json:"acquired_at,omitempty"`
	HeldMS     *int64         `json:"held_ms,omitempty"`
	Ended      string         `json:"ended"`
	Reason     string         `json:"reason,omitempty"`
	HeldBy     *heldBy        `json:"held_by,omitempty"`
	Signal     string         `json:"signal,omitempty"`
	Command    *commandStatus `json:"command,omitempty"`
	ExitCode   int            `json:"exit_code"`
	Error      string         `json:"error,omitempty"`

	// acquired is the monotonic reading of the acquisition, for HeldMS.
	acquired time.Time
}

// heldBy names the holder that kept run from the lease.
type heldBy struct {
	Holder      string `json:"holder"`
	Token       int64  `json:"token"`
	RemainingMS int64  `json:"remaining_ms"`
}

// commandStatus is how the command ended: its exit code, or the signal
// that killed it.
type commandStatus struct {
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
}

// acquiredNow records the acquisition of the tenure holder/token.
func (o *runOutcome) acquiredNow(holder string, token store.Token) {
	now := time.Now()
	at := now.UTC()
	o.Holder, o.Token, o.AcquiredAt, o.acquired = holder, int64(token), &at, now
}

// endedNow records that the tenure ended (released or lost), once.
func (o *runOutcome) endedNow() {
	if o.acquired.IsZero() || o.HeldMS != nil {
		return
	}
	ms := time.Since(o.acquired).Milliseconds()
	o.HeldMS = &ms
}

// heldElsewhere records the holder that has the lease.
func (o *runOutcome) heldElsewhere(ended string, h store.Holder, token store.Token, left time.Duration) {
	o.Ended = ended
	o.HeldBy = &heldBy{Holder: h.String(), Token: int64(token), RemainingMS: left.Milliseconds()}
}

// commandEnded records how the command's process ended.
func (o *runOutcome) commandEnded(ps *os.ProcessState) {
	if ps == nil {
		return
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		o.Command = &commandStatus{Signal: unix.SignalName(ws.Signal())}
		return
	}
	code := ps.ExitCode()
	o.Command = &commandStatus{ExitCode: &code}
}

// record completes the outcome with run's result err.
func (o *runOutcome) record(err error) {
	o.endedNow()
	o.ExitCode = exitCode(err)
	var ee *exitError
	if err != nil && (!errors.As(err, &ee) || ee.err != nil) {
		o.Error = message(err)
	}
	if o.Ended == "" {
		o.Ended = endedError
	}
}

// write writes the outcome to path: standard error for "-"; a regular
// file (or a new one) is replaced whole through a temporary file in its
// directory; anything else (a FIFO, /dev/fd/N) is written in place.
func (o *runOutcome) write(e *env, path string) error {
	b, merr := json.Marshal(o)
	if merr != nil {
		return merr
	}
	b = append(b, '\n')
	if path == "-" {
		_, werr := e.stderr.Write(b)
		return werr
	}
	if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() {
		f, oerr := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if oerr != nil {
			return oerr
		}
		_, werr := f.Write(b)
		return errors.Join(werr, f.Close())
	}
	tmp, terr := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if terr != nil {
		return terr
	}
	_, werr := tmp.Write(b)
	if werr = errors.Join(werr, tmp.Chmod(0o644), tmp.Close()); werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name()) // Best effort: the error says what failed.
	}
	return werr
}

// checkOutcomePath tells whether run --json could write path when run
// ends, without changing anything: "-", or an existing file that is not a
// directory, or a new name in a writable directory.
func checkOutcomePath(path string) error {
	if path == "-" {
		return nil
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%s is a directory; give a file name, or - for standard error", path)
	case err == nil && !fi.Mode().IsRegular():
		return unix.Access(path, unix.W_OK)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	dir := filepath.Dir(path)
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("cannot write in the directory %s: %w", dir, err)
	}
	return nil
}

// exitCodeValue is the value of --held-exit-code: an exit status a
// script can tell from tenure's own codes above 125.
type exitCodeValue struct {
	code int
	set  bool
}

func (v *exitCodeValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	return strconv.Itoa(v.code)
}

func (v *exitCodeValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 125 {
		return fmt.Errorf("%q is not an exit code from 0 to 125 (126 and up mean: cannot run, not found, killed by a signal)", s)
	}
	v.code, v.set = n, true
	return nil
}
