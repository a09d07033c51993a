package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// errHeld is what one try of a Redis anchor returns when someone else
// holds the name.
var errHeld = errors.New("bench: held by another participant")

// impl is one lock library on one store with one configuration: tenure over
// one of its stores, or an anchor, a library users would pick instead.
type impl interface {
	// participant opens a participant on connections of its own; c counts
	// what it sends (nil: nothing). A crashable participant can be killed
	// (participant.crash) and reports when it last renewed (lease.lastRenew).
	participant(ctx context.Context, id string, c *counter, crashable bool) (participant, error)
	// close releases what the impl holds for the whole run and removes what
	// the run left in the store.
	close(ctx context.Context)
}

// participant is one process competing for names.
type participant interface {
	// acquire waits, by the library's own mechanism, until name is held or
	// ctx is done.
	acquire(ctx context.Context, name string) (lease, error)
	// crash kills the participant as far as the store can tell: its
	// renewals stop and nothing is released (tenure and consul-lock: every
	// store call fails from then on).
	crash()
	close() error
}

// lease is a held name.
type lease interface {
	// renew sends one renewal now.
	renew(ctx context.Context) error
	release(ctx context.Context) error
	// lastRenew is when the participant last saw a renewal (or the
	// acquisition) succeed; only crashable participants track it.
	lastRenew() time.Time
}

// subject is one impl in one TTL profile: one row of the report.
type subject struct {
	Name     string `json:"name"`    // "tenure", "pglock", ...
	Store    string `json:"store"`   // "postgres", "redis", "etcd", "consul", "sqlite"
	Profile  string `json:"profile"` // "default" or a TTL such as "3s"
	Settings string `json:"settings"`
	// TTL is the lease's lifetime without renewal; RenewEvery how often a
	// holder renews; PollEvery the longest gap between a waiter's tries (0
	// when it is woken by the store).
	TTL        time.Duration `json:"ttl_ns"`
	RenewEvery time.Duration `json:"renew_every_ns"`
	PollEvery  time.Duration `json:"poll_every_ns"`
	// MaxLeases caps the leases of the idle-load participant (0: none).
	MaxLeases int `json:"max_leases,omitempty"`

	Result *result `json:"result"`
	impl   impl
}

func (s *subject) id() string { return s.Name + "/" + s.Store + "@" + s.Profile }

// profile is a TTL setting applied to every subject: TTL 0 means each
// library's own defaults.
type profile struct {
	name string
	ttl  time.Duration
}

func parseProfiles(s string) ([]profile, error) {
	var out []profile
	for _, f := range splitList(s) {
		if f == "default" {
			out = append(out, profile{name: f})
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < time.Second || d%time.Second != 0 {
			return nil, fmt.Errorf("-ttls: %q is neither \"default\" nor a whole number of seconds such as 3s (etcd sessions take whole seconds)", f)
		}
		out = append(out, profile{name: f, ttl: d})
	}
	if len(out) == 0 {
		return nil, errors.New("-ttls: name at least one profile, e.g. default,3s")
	}
	return out, nil
}

// env is what every impl needs to reach its store.
type env struct {
	pgURL     string
	redisAddr string
	etcd      []string // endpoints; empty when etcd is not measured
	consul    string   // agent HTTP address; empty when Consul is not measured
	// consulMinTTL is the agent's session_ttl_min.
	consulMinTTL time.Duration
	tmpDir       string // SQLite files
	runID        string
	seq          atomic.Int64
}

// key returns a name no other trial of the run uses.
func (e *env) key(what string) string {
	return "b" + e.runID + "-" + what + "-" + strconv.FormatInt(e.seq.Add(1), 10)
}

// renewLoop renews a lease every interval until stopped, for libraries
// that leave the loop to their user; it records the last success.
type renewLoop struct {
	stopOnce sync.Once
	stopCh   chan struct{}
	done     chan struct{}
	last     atomic.Int64 // UnixNano
}

func startRenewLoop(every time.Duration, renew func(ctx context.Context) error) *renewLoop {
	r := &renewLoop{stopCh: make(chan struct{}), done: make(chan struct{})}
	r.last.Store(time.Now().UnixNano())
	go func() {
		defer close(r.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-r.stopCh:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), every)
			if renew(ctx) == nil {
				r.last.Store(time.Now().UnixNano())
			}
			cancel()
		}
	}()
	return r
}

func (r *renewLoop) stop() {
	r.stopOnce.Do(func() { close(r.stopCh) })
	<-r.done
}

func (r *renewLoop) lastRenew() time.Time { return time.Unix(0, r.last.Load()) }
