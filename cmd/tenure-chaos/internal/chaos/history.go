package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event kinds in a history.
const (
	kindStart    = "start"    // a process started (Parent set for clones and forks)
	kindAcquired = "acquired" // a tenure was granted (Token, Seq, Holder)
	kindOther    = "other"    // the harness was granted a tenure of another lease of the same store (Token)
	kindAdopted  = "adopted"  // a clone adopted its parent's tenure
	kindLost     = "lost"     // a tenure ended (Detail: the reason)
	kindTry      = "try"      // a write is about to be sent (Res, WID, Token)
	kindDone     = "done"     // a write's outcome (Res, WID, Token, Result)
	kindSnapshot = "snapshot" // a holder's tenure state was taken for a clone (Counter)
	kindClock    = "clock"    // a process's library clock was shifted (Dur)
	kindFault    = "fault"    // the nemesis injected a fault (Fault, Target, Token, Dur)
	kindHeal     = "heal"     // the nemesis ended a fault
	kindLeader   = "leader"   // a clustered store agreed on a new leader after a fault on its leader (Dur: since the fault)
	kindExit     = "exit"     // a process is about to exit on its own
)

// Write outcomes.
const (
	resultOK      = "ok"      // the resource acknowledged the write
	resultFenced  = "fenced"  // the resource refused the token
	resultUnknown = "unknown" // an error: the write may or may not have landed
)

// Resources every worker writes to.
const (
	resFenced = "fenced"
	resTwin   = "twin"
	// resBegin is a tenure's first call to the fenced resource, before
	// any write: a worker logs it when it fails (a pause or a cut during
	// it), and then writes nothing in that tenure.
	resBegin = "begin"
)

// Event is one line of a history. T is the machine's real wall clock in
// Unix nanoseconds, never the clock injected into the library. Proc is the
// ground-truth identity of the process that logged it (see [groundTruth]).
type Event struct {
	T       int64  `json:"t"`
	Proc    string `json:"p,omitempty"`
	Slot    int    `json:"slot"`
	Kind    string `json:"k"`
	Res     string `json:"res,omitempty"`
	WID     string `json:"wid,omitempty"`
	Token   int64  `json:"tok,omitempty"`
	Seq     int64  `json:"seq,omitempty"`
	Result  string `json:"r,omitempty"`
	Fault   string `json:"fault,omitempty"`
	Target  string `json:"target,omitempty"`
	Dur     int64  `json:"dur,omitempty"`
	Parent  string `json:"parent,omitempty"`
	Counter int64  `json:"ctr,omitempty"`
	Holder  string `json:"holder,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// historyWriter appends events to a file shared by every process of a
// cell. The file is opened with O_APPEND and each event is one write(2),
// so lines of different processes never interleave.
type historyWriter struct {
	mu   sync.Mutex
	f    *os.File
	proc string
	slot int
}

func openHistory(path, proc string, slot int) (*historyWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaos: open history %s: %w", path, err)
	}
	return &historyWriter{f: f, proc: proc, slot: slot}, nil
}

// log appends e, stamped with the time, the process and the slot.
func (h *historyWriter) log(e Event) {
	e.T = time.Now().UnixNano()
	if e.Proc == "" {
		e.Proc = h.proc
	}
	if e.Slot == 0 {
		e.Slot = h.slot
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	b = append(b, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, _ = h.f.Write(b)
}

func (h *historyWriter) close() error { return h.f.Close() }

// readHistory reads a history file, in file order.
func readHistory(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("chaos: read history: %w", err)
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("chaos: history %s: bad line %q: %w", path, sc.Text(), err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("chaos: read history %s: %w", path, err)
	}
	return out, nil
}

// byTime returns the events sorted by time, stably (file order breaks ties).
func byTime(evs []Event) []Event {
	out := append([]Event(nil), evs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// groundTruth returns this process's identity as the machine knows it: its
// pid and its start time in clock ticks since boot (/proc/self/stat field
// 22). No library state can copy it: a clone or a forked child is another
// process with another pid.
func groundTruth() string {
	pid := os.Getpid()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return fmt.Sprintf("%d:%d", pid, time.Now().UnixNano())
	}
	// The command name (field 2) may contain spaces; fields after it are
	// counted from the closing parenthesis.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		f := strings.Fields(s[i+1:])
		if len(f) > 19 {
			return fmt.Sprintf("%d:%s", pid, f[19])
		}
	}
	return fmt.Sprintf("%d:%d", pid, time.Now().UnixNano())
}

// makeWID names one write: the writer's ground truth and its counter.
func makeWID(proc string, counter int64) string { return proc + "/" + strconv.FormatInt(counter, 10) }

// splitWID returns the writer and counter of a write id.
func splitWID(wid string) (string, int64) {
	i := strings.LastIndexByte(wid, '/')
	if i < 0 {
		return wid, 0
	}
	n, _ := strconv.ParseInt(wid[i+1:], 10, 64)
	return wid[:i], n
}
