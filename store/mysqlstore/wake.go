package mysqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure/store"
)

var (
	_ store.Notifier   = (*Store)(nil)
	_ store.Subscriber = (*Store)(nil)
)

const (
	// maxBellWaits is the most connections a store keeps blocked on other
	// holders' bells at once (one per lease it waits for); the leases
	// beyond it are taken at their expiry, as without wake-ups.
	maxBellWaits = 16
	// bellWait is how long one GET_LOCK of a waiter blocks before it asks
	// again: the idle cost of a waiter is one statement per bellWait.
	bellWait = 5 * time.Second
	// bellTake is how long the holder's connection waits to take its bell
	// (waiters woken by the last release hold it for a moment each); the
	// other bells' releases wait meanwhile.
	bellTake = 100 * time.Millisecond
	// bellRetryMin and bellRetryMax bound the wait of a waiter that found
	// the bell of its lease not held (the holder has not taken it yet, or
	// died, or runs a library without bells) before it looks again.
	bellRetryMin = 20 * time.Millisecond
	bellRetryMax = time.Second
)

// bells are the user-level locks (GET_LOCK) that carry wake-ups: a
// holder's store keeps one connection holding the bell of every lease it
// holds, and a store whose client waits for a lease blocks a connection of
// its own on that lease's bell. A release (the bell is freed while the
// release is sent), or the holder's connection ending (its process died),
// frees the bell, which wakes the waiter at once. A bell is only a hint: the acquisition is the procedure's
// compare-and-set, as always.
type bells struct {
	s *Store
	// waits holds a token per waiting connection: at most maxBellWaits,
	// and when db caps its connections, so few that the bells (the
	// holder's connection and the waiting ones) take at most half of
	// them; none turns wake-ups off.
	waits chan struct{}

	mu      sync.Mutex
	keep    map[string]string // lease name → bell the holder's connection should hold
	kept    map[string]string // lease name → bell it does hold
	changed chan struct{}     // closed and replaced when keep changes
	kick    chan struct{}     // buffered 1: the keeper has work
	all     []*queue
	wg      sync.WaitGroup
	started bool
	closed  bool
	enabled bool
}

// queue is one Listen call's notices, with a mark for those it dropped.
type queue struct {
	c    chan store.Notice
	lost atomic.Bool
}

func newQueue() *queue { return &queue{c: make(chan store.Notice, 256)} }

func (q *queue) put(n store.Notice) {
	select {
	case q.c <- n:
	default:
		q.lost.Store(true)
	}
}

// deliver hands q's notices to notify until ctx ends; in place of notices
// it dropped, notify gets the empty one (they may have been lost).
func (q *queue) deliver(ctx context.Context, notify func(store.Notice)) {
	notify(store.Notice{})
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-q.c:
			if q.lost.Swap(false) {
				n = store.Notice{}
			}
			notify(n)
		}
	}
}

func newBells(s *Store) *bells {
	b := &bells{s: s, keep: map[string]string{}, kept: map[string]string{}, changed: make(chan struct{}), kick: make(chan struct{}, 1)}
	n := maxBellWaits
	if limit := s.db.Stats().MaxOpenConnections; limit > 0 {
		n = min(n, limit/2-1)
	}
	if n > 0 {
		b.enabled = true
		b.waits = make(chan struct{}, n)
	}
	return b
}

// bellName is the lock name of lease name: user-level locks are
// server-wide and at most 64 characters, so it is a digest of the store's
// objects and the name.
func (b *bells) bellName(name string) string {
	sum := sha256.Sum256([]byte(b.s.obj.Ident(b.s.obj.Leases) + "\x00" + name))
	return "tenure:" + hex.EncodeToString(sum[:20])
}

// hold asks the keeper to hold the bell of name (the store acquired it),
// or, with on false, to free it (the store released it or lost it).
func (b *bells) hold(name string, on bool) {
	if !b.enabled {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.keep[name]; ok == on {
		return
	}
	if on {
		b.keep[name] = b.bellName(name)
	} else {
		delete(b.keep, name)
	}
	close(b.changed)
	b.changed = make(chan struct{})
	if !b.started && !b.closed {
		b.started = true
		b.wg.Go(b.keeper)
	}
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// holds reports whether this store holds name, and a channel closed when
// that may have changed.
func (b *bells) holds(name string) (bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.keep[name]
	return ok, b.changed
}

// keeper runs the holder's connection: it takes the bells to keep and
// frees the others, until the store is closed. After a failure it drops
// the connection (and with it every bell) and starts again on a new one.
func (b *bells) keeper() {
	ctx := b.s.gate.Context()
	var conn *sql.Conn
	defer func() { discard(conn) }()
	retry := bellRetryMin
	for {
		if conn == nil {
			c, err := b.s.db.Conn(ctx)
			if err != nil {
				if !sleep(ctx, retry) {
					return
				}
				retry = min(2*retry, bellRetryMax)
				continue
			}
			conn = c
		}
		if err := b.reconcile(ctx, conn); err != nil {
			discard(conn)
			conn = nil
			b.mu.Lock()
			clear(b.kept)
			b.mu.Unlock()
			if !sleep(ctx, retry) {
				return
			}
			retry = min(2*retry, bellRetryMax)
			continue
		}
		retry = bellRetryMin
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
	}
}

// reconcile makes the bells conn holds those of keep: it frees first,
// so a release wakes its waiters before anything else is done. A bell it
// cannot take within bellTake (the holder of an earlier tenure has not
// given it up) is left until keep next changes: that lease's followers
// then wake at its expiry, as without bells.
func (b *bells) reconcile(ctx context.Context, conn *sql.Conn) error {
	skip := make(map[string]bool)
	for {
		b.mu.Lock()
		var name, bell string
		take := false
		for n, l := range b.kept {
			if _, ok := b.keep[n]; !ok {
				name, bell = n, l
				break
			}
		}
		if name == "" {
			for n, l := range b.keep {
				if _, ok := b.kept[n]; !ok && !skip[n] {
					name, bell, take = n, l, true
					break
				}
			}
		}
		b.mu.Unlock()
		if name == "" {
			return nil
		}
		if !take {
			if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", bell); err != nil {
				return err
			}
			b.mu.Lock()
			delete(b.kept, name)
			b.mu.Unlock()
			continue
		}
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", bell, bellTake.Seconds()).Scan(&got); err != nil {
			return err
		}
		if got.Int64 != 1 {
			skip[name] = true
			continue
		}
		b.mu.Lock()
		b.kept[name] = bell
		b.mu.Unlock()
	}
}

// wait blocks a connection on the bell of name until it rings, and calls
// ring each time it does, until ctx ends. A store that holds name itself
// does not wait for it. A bell that nobody holds (the lease was just
// released, or its holder has not taken the bell yet, or died, or runs a
// library without bells) rings too while it has been free for a short
// while (the first looks, about a second in all), since a release may
// have come between two looks; then it is looked at once a second, quietly.
func (b *bells) wait(ctx context.Context, name string, ring func()) {
	if !b.enabled {
		<-ctx.Done()
		return
	}
	bell := b.bellName(name)
	retry := bellRetryMin
	var conn *sql.Conn
	release := func() {
		if conn != nil {
			discard(conn)
			conn = nil
			<-b.waits
		}
	}
	defer release()
	for ctx.Err() == nil {
		if mine, changed := b.holds(name); mine {
			release()
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			retry = bellRetryMin
			continue
		}
		if conn == nil {
			select {
			case <-ctx.Done():
				return
			case b.waits <- struct{}{}:
			}
			c, err := b.s.db.Conn(ctx)
			if err != nil {
				<-b.waits
				if !sleep(ctx, retry) {
					return
				}
				retry = min(2*retry, bellRetryMax)
				continue
			}
			conn = c
		}
		free, err := ringOnce(ctx, conn, bell, ring)
		switch {
		case err != nil:
			release()
		case free:
			if retry < bellRetryMax {
				ring()
			}
		default:
			retry = bellRetryMin
			continue
		}
		if !sleep(ctx, retry) {
			return
		}
		retry = min(2*retry, bellRetryMax)
	}
}

// ringOnce looks at bell on conn: free when nobody holds it; otherwise it
// blocks on it for up to bellWait, and when it was freed calls ring, then
// frees it again at once, for the other waiters and the next holder.
func ringOnce(ctx context.Context, conn *sql.Conn, bell string, ring func()) (free bool, err error) {
	var user sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", bell).Scan(&user); err != nil {
		return false, err
	}
	if !user.Valid {
		return true, nil
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", bell, bellWait.Seconds()).Scan(&got); err != nil {
		return false, err
	}
	if got.Int64 != 1 {
		return false, nil
	}
	ring()
	_, err = conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", bell)
	return false, err
}

// discard ends conn instead of returning it to db's pool: it may hold
// bells, which are session state the pool must not hand on.
func discard(conn *sql.Conn) {
	if conn == nil {
		return
	}
	_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // Makes database/sql close the connection.
	_ = conn.Close()                                           // Already closed; nothing more to do.
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// close stops the keeper and waits for it; the gate is shut already.
func (b *bells) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}

// announce hands a release made through this store to the listeners of
// every name.
func (b *bells) announce(n store.Notice) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, q := range b.all {
		q.put(n)
	}
}

// Listen implements [store.Notifier.Listen], for the leases released
// through this store only: MySQL announces nothing, so a listener of every
// name cannot hear other processes' releases. A client hears those
// through its subscription ([Store.Subscribe]), which waits on the bell of
// each lease it follows.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, func(ctx context.Context, notify func(store.Notice)) {
		q := newQueue()
		b := s.bells
		b.mu.Lock()
		b.all = append(b.all, q)
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			for i, c := range b.all {
				if c == q {
					b.all = append(b.all[:i], b.all[i+1:]...)
					break
				}
			}
		}()
		q.deliver(ctx, notify)
	})
}

// Subscribe implements [store.Subscriber]: each Listen call of the
// subscription blocks one connection on the bell of each lease it follows
// and this store does not hold (at most 16 for the store), and announces
// a [store.NoticeChanged] when the bell rings: the lease was released, or
// its holder's connection ended.
func (s *Store) Subscribe() store.Subscription {
	return &subscription{s: s, names: map[string]struct{}{}}
}

type subscription struct {
	s       *Store
	mu      sync.Mutex
	names   map[string]struct{}
	listens map[*listenCall]struct{}
}

// listenCall is one Listen call of a subscription: its waits by name.
type listenCall struct {
	ctx   context.Context
	queue *queue
	waits map[string]context.CancelFunc
	wg    *sync.WaitGroup
}

func (c *listenCall) start(b *bells, name string) {
	ctx, cancel := context.WithCancel(c.ctx)
	c.waits[name] = cancel
	c.wg.Go(func() {
		b.wait(ctx, name, func() { c.queue.put(store.Notice{Name: name, Kind: store.NoticeChanged}) })
	})
}

func (sub *subscription) Listen(ctx context.Context, notify func(store.Notice)) error {
	s := sub.s
	return s.gate.Listen(ctx, notify, func(ctx context.Context, notify func(store.Notice)) {
		var wg sync.WaitGroup
		c := &listenCall{ctx: ctx, queue: newQueue(), waits: map[string]context.CancelFunc{}, wg: &wg}
		sub.mu.Lock()
		if sub.listens == nil {
			sub.listens = map[*listenCall]struct{}{}
		}
		sub.listens[c] = struct{}{}
		for name := range sub.names {
			c.start(s.bells, name)
		}
		sub.mu.Unlock()
		defer func() {
			sub.mu.Lock()
			delete(sub.listens, c)
			for _, cancel := range c.waits {
				cancel()
			}
			sub.mu.Unlock()
			wg.Wait()
		}()
		c.queue.deliver(ctx, notify)
	})
}

func (sub *subscription) Follow(name string) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if _, ok := sub.names[name]; ok {
		return
	}
	sub.names[name] = struct{}{}
	for c := range sub.listens {
		c.start(sub.s.bells, name)
	}
}

func (sub *subscription) Unfollow(name string) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if _, ok := sub.names[name]; !ok {
		return
	}
	delete(sub.names, name)
	for c := range sub.listens {
		if cancel, ok := c.waits[name]; ok {
			cancel()
			delete(c.waits, name)
		}
	}
}
