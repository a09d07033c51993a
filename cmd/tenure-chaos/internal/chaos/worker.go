package chaos

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure/internal/snapshot"
	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure"
)

// offsetClock is the library's clock shifted by an offset the nemesis
// sets: the wall clock lies, the monotonic clock does not.
type offsetClock struct {
	base tenure.Clock
	off  atomic.Int64
}

func (c *offsetClock) Now() (time.Time, time.Duration) {
	wall, mono := c.base.Now()
	return wall.Add(time.Duration(c.off.Load())), mono
}

// workerArgs are a worker's flags, beyond its spec.
type workerArgs struct {
	spec    spec
	adopt   string // base64 JSON tenure state: run as a clone of it
	parent  string // ground truth of the process cloned or forked from
	counter int64  // the parent's write counter at the snapshot
	life    time.Duration
	forked  bool
	histFD  int // inherited history file descriptor (forked children)
}

// worker is one process of a cell.
type worker struct {
	args  workerArgs
	proc  string
	hist  *historyWriter
	clock *offsetClock
	store store.Store
	res   resource
	cli   *tenure.Client
	out   sync.Mutex // stdout lines

	mu      sync.Mutex // held across each write pair and each snapshot
	current *tenure.Lease
	counter int64
}

func (w *worker) say(format string, args ...any) {
	w.out.Lock()
	defer w.out.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// runWorker is the worker role: campaign, write under the tenure, repeat.
func runWorker(ctx context.Context, a workerArgs) error {
	w := &worker{args: a, proc: groundTruth(), clock: &offsetClock{base: tenure.NewSystemClock()}}
	var err error
	if a.histFD > 0 {
		w.hist = &historyWriter{f: os.NewFile(uintptr(a.histFD), "history"), proc: w.proc, slot: a.spec.Slot}
	} else if w.hist, err = openHistory(a.spec.History, w.proc, a.spec.Slot); err != nil {
		return err
	}
	defer w.hist.close()
	if a.life > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.life)
		defer cancel()
	}
	kind := "worker"
	switch {
	case a.adopt != "":
		kind = "clone"
	case a.forked:
		kind = "fork"
	}
	w.hist.log(Event{Kind: kindStart, Parent: a.parent, Counter: a.counter, Detail: kind})
	w.say("hello %s", w.proc)
	var closeAll func()
	w.store, w.res, closeAll, err = openWorker(ctx, a.spec)
	if err != nil {
		return err
	}
	defer closeAll()
	label := "w" + strconv.Itoa(a.spec.Slot)
	if a.forked {
		label = "f" + strconv.Itoa(a.spec.Slot)
	}
	w.cli, err = tenure.New(w.store, tenure.Config{Label: label, TTL: a.spec.TTL, Clock: w.clock})
	if err != nil {
		return err
	}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan struct{})
	go func() { _ = w.cli.Run(runCtx); close(ran) }()
	defer func() { stopRun(); <-ran }()
	if a.adopt == "" && !a.forked {
		go w.control(ctx)
	}
	if a.adopt != "" {
		var st snapshot.Tenure
		b, err := base64.StdEncoding.DecodeString(a.adopt)
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil {
			return fmt.Errorf("chaos: bad -adopt state: %w", err)
		}
		l, err := adoptClone(ctx, w.cli, st)
		if err != nil {
			w.hist.log(Event{Kind: kindExit, Detail: "adopt failed: " + err.Error()})
			return nil
		}
		w.hist.log(Event{Kind: kindAdopted, Token: int64(st.Token), Seq: st.Seq, Holder: st.Holder.Instance, Detail: st.Name})
		w.hold(ctx, l)
		w.hist.log(Event{Kind: kindExit, Detail: "clone done"})
		return nil
	}
	for ctx.Err() == nil {
		l, err := w.campaign(ctx)
		if err != nil {
			continue
		}
		st := snapshot.Take(l)
		w.hist.log(Event{Kind: kindAcquired, Token: int64(st.Token), Seq: st.Seq, Holder: st.Holder.Instance, Detail: l.Name()})
		w.say("held %d %s", st.Token, w.proc)
		w.hold(ctx, l)
	}
	w.hist.log(Event{Kind: kindExit, Detail: "done"})
	return nil
}

// campaign waits for the cell's lease, or for one of its slots when it
// has them.
func (w *worker) campaign(ctx context.Context) (*tenure.Lease, error) {
	if n := w.args.spec.LeaseSlots; n > 0 {
		return w.cli.CampaignSlot(ctx, w.args.spec.Lease, n)
	}
	return w.cli.Campaign(ctx, w.args.spec.Lease)
}

// hold writes under l until the tenure ends, then logs why.
func (w *worker) hold(ctx context.Context, l *tenure.Lease) {
	st := snapshot.Take(l)
	tok := st.Token
	defer func() {
		select {
		case <-l.Done():
		case <-ctx.Done():
		}
		detail := "context done"
		if err := l.Err(); err != nil {
			detail = err.Error()
		}
		w.hist.log(Event{Kind: kindLost, Token: int64(tok), Detail: detail})
		w.mu.Lock()
		w.current = nil
		w.mu.Unlock()
	}()
	bctx, cancel := context.WithTimeout(ctx, w.args.spec.TTL)
	err := w.res.begin(bctx, l, tok)
	cancel()
	if err != nil {
		w.hist.log(Event{Kind: kindDone, Res: resBegin, Token: int64(tok), Result: outcome(err), Detail: err.Error()})
		_ = l.Release(context.WithoutCancel(ctx))
		return
	}
	w.mu.Lock()
	w.current = l
	w.mu.Unlock()
	for {
		if !w.writePair(ctx, l) {
			_ = l.Release(context.WithoutCancel(ctx))
			return
		}
		select {
		case <-l.Done():
			return
		case <-ctx.Done():
			return
		case <-time.After(w.args.spec.Gap):
		}
	}
}

// writePair makes one write to the fenced chain and the same write to the
// twin. It returns false when the tenure must not be used any more.
func (w *worker) writePair(ctx context.Context, l *tenure.Lease) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	tok := l.Token()
	if tok == 0 {
		return false
	}
	// The work the write carries takes a while, between the lease check
	// and the write: a pause that lands here is the textbook stale write.
	time.Sleep(w.args.spec.Work)
	w.counter++
	wid := makeWID(w.proc, w.counter)
	wctx, cancel := context.WithTimeout(ctx, w.args.spec.TTL)
	defer cancel()
	w.hist.log(Event{Kind: kindTry, Res: resFenced, WID: wid, Token: int64(tok)})
	ferr := w.res.fenced(wctx, l, tok, wid)
	w.hist.log(Event{Kind: kindDone, Res: resFenced, WID: wid, Token: int64(tok), Result: outcome(ferr), Detail: errText(ferr)})
	// The twin gets the same write whatever the fence said: a worker
	// without fencing would not have been told.
	w.hist.log(Event{Kind: kindTry, Res: resTwin, WID: wid, Token: int64(tok)})
	terr := w.res.twin(wctx, tok, wid)
	w.hist.log(Event{Kind: kindDone, Res: resTwin, WID: wid, Token: int64(tok), Result: outcome(terr), Detail: errText(terr)})
	return !errors.Is(ferr, store.ErrFenced)
}

func outcome(err error) string {
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, store.ErrFenced):
		return resultFenced
	}
	return resultUnknown
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// control serves the harness's commands on stdin, one per line:
//
//	clock <nanoseconds>  shift the library's wall clock by that much more
//	snapshot             print "state <base64 JSON>" of the held tenure, or "state none"
//	fork                 start a child with this process's environment, flags and history file
func (w *worker) control(ctx context.Context) {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "clock":
			if len(f) == 2 {
				d, _ := strconv.ParseInt(f[1], 10, 64)
				w.clock.off.Add(d)
				w.hist.log(Event{Kind: kindClock, Dur: d})
			}
		case "snapshot":
			w.say("state %s", w.snapshot())
		case "fork":
			w.fork()
		}
	}
}

// snapshot returns the held tenure's state as a snapshot of this process
// would contain it, taken between two writes.
func (w *worker) snapshot() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current == nil {
		return "none"
	}
	st := snapshot.Take(w.current)
	if st.Remaining <= 0 {
		return "none"
	}
	b, err := json.Marshal(st)
	if err != nil {
		return "none"
	}
	w.hist.log(Event{Kind: kindSnapshot, Token: int64(st.Token), Seq: st.Seq, Counter: w.counter + 1})
	return strconv.FormatInt(w.counter+1, 10) + " " + base64.StdEncoding.EncodeToString(b)
}

// fork starts a child worker that inherits this process's environment,
// command line, stdout and history file descriptor, as a fork of a
// process (or a copy of its disk) would. It is a new process: it must
// campaign for itself (nothing local asserts leadership, promise P7).
func (w *worker) fork() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	args := append(append([]string(nil), os.Args[1:]...), "-forked", "-parent", w.proc, "-histfd", "3",
		"-life", (4 * w.args.spec.TTL).String())
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{w.hist.f}
	if err := cmd.Start(); err != nil {
		w.hist.log(Event{Kind: kindExit, Detail: "fork failed: " + err.Error()})
		return
	}
	go func() { _ = cmd.Wait() }()
}

// adoptClone makes c hold st as the process it was taken from does.
func adoptClone(ctx context.Context, c *tenure.Client, st snapshot.Tenure) (*tenure.Lease, error) {
	l, err := snapshot.Adopt(ctx, c, st)
	if err != nil {
		return nil, err
	}
	return l.(*tenure.Lease), nil
}
