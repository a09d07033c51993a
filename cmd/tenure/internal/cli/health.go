package cli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tenure-dev/tenure"
)

// health serves run --health: three probes, each a question a platform
// asks, so that none of them deadlocks a rolling update.
//
//   - /livez (liveness): is this run working, or wedged? 503 only while it
//     holds the lease and, with --progress-timeout, the command has not
//     reported progress for that long: the holder is wedged. A standby
//     waiting for the lease is alive.
//   - /readyz (readiness): may this run be counted on? 200 from the start,
//     waiting or holding; 503 once its tenure has ended (lost or
//     released) and the run is on its way out. A standby is ready, so a
//     rolling update's new pod becomes ready while the old one holds the
//     lease, and the old one is then stopped.
//   - /leaderz (the holder-only check; /healthz is its older name): 200
//     only while the lease is held and progress is fresh. It answers 503 on
//     every standby: never a readiness or liveness probe of a Deployment
//     with more than one replica.
//
// A process that answers 200 while its work is wedged is the liveness
// probe that lies; /livez and /leaderz ask the progress gate.
type health struct {
	*listening
	name            string
	progressTimeout time.Duration

	mu           sync.Mutex
	lease        *tenure.Lease
	lastProgress time.Time // monotonic; the acquisition counts as progress
}

// listenHealth listens on addr; serve starts answering.
func listenHealth(addr, name string, progressTimeout time.Duration) (*health, error) {
	h := &health{name: name, progressTimeout: progressTimeout}
	l, err := listen(addr, h)
	if err != nil {
		return nil, err
	}
	h.listening = l
	return h, nil
}

// held records the tenure whose health the probes report.
func (h *health) held(l *tenure.Lease) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lease, h.lastProgress = l, time.Now()
}

// progressed records a progress report of the command.
func (h *health) progressed() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastProgress = time.Now()
}

// The probes, by path.
const (
	probeLive   = "/livez"
	probeReady  = "/readyz"
	probeLeader = "/leaderz"
	probeHealth = "/healthz" // the older name of /leaderz
)

// state is the answer of the probe at path now: the status code and why.
func (h *health) state(path string) (int, string) {
	h.mu.Lock()
	l, last := h.lease, h.lastProgress
	h.mu.Unlock()
	if l == nil {
		if path == probeLive || path == probeReady {
			return http.StatusOK, fmt.Sprintf("standby: waiting for lease %q", h.name)
		}
		return http.StatusServiceUnavailable, fmt.Sprintf("not holding lease %q: waiting for it", h.name)
	}
	token := l.Token()
	if token == 0 {
		why := fmt.Sprintf("lease %q is no longer trusted: no renewal was seen in time", h.name)
		if err := l.Err(); err != nil {
			var lost *tenure.LostError
			if errors.As(err, &lost) && lost.Reason == tenure.LossReleased {
				why = fmt.Sprintf("lease %q was released: the command is done", h.name)
			} else {
				why = fmt.Sprintf("lease %q lost: %s", h.name, lossReason(err))
			}
		}
		if path == probeLive {
			return http.StatusOK, why + "; the run is ending"
		}
		return http.StatusServiceUnavailable, why
	}
	since := time.Since(last)
	if h.progressTimeout > 0 && since >= h.progressTimeout {
		if path == probeReady {
			return http.StatusOK, fmt.Sprintf("holding lease %q with token %d; no progress for %s (--progress-timeout %s)", h.name, token, since.Round(time.Millisecond), h.progressTimeout)
		}
		return http.StatusServiceUnavailable, fmt.Sprintf("holding lease %q with token %d, but no progress for %s (--progress-timeout %s): the command looks stuck",
			h.name, token, since.Round(time.Millisecond), h.progressTimeout)
	}
	if h.progressTimeout > 0 {
		return http.StatusOK, fmt.Sprintf("holding lease %q with token %d; last progress %s ago", h.name, token, since.Round(time.Millisecond))
	}
	return http.StatusOK, fmt.Sprintf("holding lease %q with token %d", h.name, token)
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case probeLive, probeReady, probeLeader, probeHealth:
	default:
		http.Error(w, "not found: tenure run serves /livez, /readyz and /leaderz (/healthz: the same as /leaderz)", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	code, why := h.state(r.URL.Path)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, why)
}

// checkListenAddr refuses an address flag's value a listener could never
// take: not host:port, or a port that is not a number from 0 to 65535.
// Whether the port is free is the listener's to find out.
func checkListenAddr(flagName, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q is not host:port, as in 127.0.0.1:8080 or :8080", flagName, addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%s %q: the port %q is not a number from 0 to 65535", flagName, addr, port)
	}
	return nil
}
