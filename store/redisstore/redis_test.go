package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/redisstore"
)

// eventTimeout bounds every wait for an event.
const eventTimeout = 10 * time.Second

// testBundle is a store on a key prefix of its own and the client under it.
type testBundle struct {
	client *redis.Client
	store  *redisstore.Store
	keys   redisstore.Keys
}

// setup returns a store on the shared server with a fresh prefix whose
// keys are deleted when the test ends.
func setup(t *testing.T) *testBundle {
	t.Helper()
	c := redisserver.RedisClient(t)
	s := newStore(t, c, redisserver.RedisPrefix(t, c))
	return &testBundle{client: c, store: s, keys: s.Keys()}
}

func newStore(t *testing.T, c redisstore.Client, prefix string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c, redisstore.Config{KeyPrefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func acquire(t *testing.T, s store.Store, name string, h store.Holder, ttl time.Duration) store.Grant {
	t.Helper()
	g, err := s.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: ttl})
	require.NoError(t, err, "acquire %q", name)
	return g
}

func release(t *testing.T, s store.Store, g store.Grant) {
	t.Helper()
	require.NoError(t, s.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}))
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg     redisstore.Config
		wantErr string
		want    redisstore.Keys
	}{
		"Defaults":      {want: redisstore.Keys{Prefix: "tenure:", Counter: "tenure:token", Channel: "tenure:notify"}},
		"Custom":        {cfg: redisstore.Config{KeyPrefix: "app/"}, want: redisstore.Keys{Prefix: "app/", Counter: "app/token", Channel: "app/notify"}},
		"LongestPrefix": {cfg: redisstore.Config{KeyPrefix: strings.Repeat("p", redisstore.MaxKeyPrefixLen)}},
		"GlobAndUTF8":   {cfg: redisstore.Config{KeyPrefix: `ünï*?[a]\:`}},
		"TooLong":       {cfg: redisstore.Config{KeyPrefix: strings.Repeat("p", redisstore.MaxKeyPrefixLen+1)}, wantErr: "KeyPrefix"},
		"Control":       {cfg: redisstore.Config{KeyPrefix: "a\nb"}, wantErr: "control character"},
		"NUL":           {cfg: redisstore.Config{KeyPrefix: "a\x00b"}, wantErr: "control character"},
		"InvalidUTF8":   {cfg: redisstore.Config{KeyPrefix: "a\xffb"}, wantErr: "UTF-8"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			keys, err := tc.cfg.Keys()
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
			t.Cleanup(func() { _ = c.Close() })
			_, newErr := redisstore.New(c, tc.cfg)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, store.ErrInvalid)
				require.ErrorContains(t, err, tc.wantErr)
				require.ErrorIs(t, newErr, store.ErrInvalid, "New validates the config")
				return
			}
			require.NoError(t, err)
			require.NoError(t, newErr)
			if tc.want != (redisstore.Keys{}) {
				require.Equal(t, tc.want, keys)
			}
			require.Equal(t, keys.Prefix+"lease:job", keys.Record("job"))
			require.Equal(t, keys.Prefix+"held:job", keys.Held("job"))
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cluster.Close() })
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { _ = ring.Close() })
	for name, c := range map[string]redisstore.Client{
		"Nil":      nil,
		"TypedNil": (*redis.Client)(nil),
		"Cluster":  cluster,
		"Ring":     ring,
	} {
		_, err := redisstore.New(c, redisstore.Config{})
		require.ErrorIs(t, err, store.ErrInvalid, name)
	}
}

// TestKeyLayout checks the keys and the channel the package documentation
// describes, and that nothing else is written.
func TestKeyLayout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	name := "job:" + testutil.UniqueName(t)
	ps := b.client.Subscribe(ctx, b.keys.Channel)
	t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)

	g := acquire(t, b.store, name, testutil.Holder(t, "holder"), time.Minute)
	tok := strconv.FormatInt(int64(g.Token), 10)
	rec, err := b.client.HGetAll(ctx, b.keys.Record(name)).Result()
	require.NoError(t, err)
	require.Equal(t, g.Holder.Label, rec["label"])
	require.Equal(t, g.Holder.Instance, rec["instance"])
	require.Equal(t, tok, rec["token"])
	require.Equal(t, "1", rec["seq"])
	require.Equal(t, "0", rec["released"])
	require.NotEmpty(t, rec["acquired_s"])
	require.NotEmpty(t, rec["acquired_us"])
	require.Contains(t, rec, "payload")
	require.Empty(t, rec["payload"])
	require.Equal(t, "0", rec["kept_until"], "a tenure is kept for nobody")
	require.Empty(t, rec["kept_label"])
	require.Empty(t, rec["kept_instance"])
	require.Len(t, rec, 11)
	require.Equal(t, tok, b.client.Get(ctx, b.keys.Held(name)).Val(), "the held key holds the token")
	pttl := b.client.PTTL(ctx, b.keys.Held(name)).Val()
	require.Positive(t, pttl)
	require.LessOrEqual(t, pttl, time.Minute, "the held key's TTL is the expiry")
	require.Equal(t, tok, b.client.Get(ctx, b.keys.Counter).Val())

	msgCtx, cancel := context.WithTimeout(ctx, eventTimeout)
	defer cancel()
	msg, err := ps.ReceiveMessage(msgCtx)
	require.NoError(t, err)
	require.Equal(t, b.keys.Channel, msg.Channel)
	require.JSONEq(t, fmt.Sprintf(`{"n":%q,"k":"a","hl":%q,"hi":%q,"ttl":60000000}`, name, g.Holder.Label, g.Holder.Instance),
		msg.Payload, "an acquisition is announced with its holder and TTL")

	release(t, b.store, g)
	msg, err = ps.ReceiveMessage(msgCtx)
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"n":%q,"k":"r","nl":"","ni":""}`, name), msg.Payload,
		"a release is announced with the follower it is kept for (none)")

	require.Zero(t, b.client.Exists(ctx, b.keys.Held(name)).Val(), "release deletes the held key")
	require.Equal(t, "1", b.client.HGet(ctx, b.keys.Record(name), "released").Val())
	require.Equal(t, tok, b.client.Get(ctx, b.keys.Counter).Val(), "release keeps the counter")
	keys, err := b.client.Keys(ctx, b.keys.Prefix+"*").Result()
	require.NoError(t, err)
	slices.Sort(keys)
	require.Equal(t, []string{b.keys.Record(name), b.keys.Counter}, keys, "nothing else is written")
}

// commandLog records the commands a client sends.
type commandLog struct {
	mu    sync.Mutex
	names []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.mu.Lock()
		l.names = append(l.names, cmd.Name())
		l.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.mu.Lock()
		l.names = append(l.names, "pipeline")
		l.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (l *commandLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := l.names
	l.names = nil
	return names
}

func TestRenewIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	c := redisserver.RedisClient(t)
	log := &commandLog{}
	c.AddHook(log)
	s := newStore(t, c, redisserver.RedisPrefix(t, c))
	holder := testutil.Holder(t, "holder")
	ps := make([]store.RenewParams, 500)
	for i := range ps {
		g := acquire(t, s, fmt.Sprintf("lease-%03d", i), holder, time.Minute)
		ps[i] = store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: time.Minute}
	}
	renew := func() {
		rs, err := s.Renew(t.Context(), ps)
		require.NoError(t, err)
		for i, r := range rs {
			require.True(t, r.Renewed)
			ps[i].Seq = r.Grant.Seq
		}
	}
	renew() // loads the script into the server's cache if it is not there yet
	log.take()
	for round := range 3 {
		renew()
		require.Equal(t, []string{"evalsha"}, log.take(), "renewal round %d of %d leases", round, len(ps))
	}
}

// TestAcquireBatchIsOneRoundTrip acquires 1,000 leases, one of them held
// by another holder, in one script call: each is granted or refused as
// Acquire would, and the tokens of the grants grow in the batch's order.
func TestAcquireBatchIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	c := redisserver.RedisClient(t)
	log := &commandLog{}
	c.AddHook(log)
	s := newStore(t, c, redisserver.RedisPrefix(t, c))
	me, other := testutil.Holder(t, "me"), testutil.Holder(t, "other")
	taken := acquire(t, s, "lease-0500", other, time.Minute)
	ps := make([]store.AcquireParams, 1000)
	for i := range ps {
		ps[i] = store.AcquireParams{Name: fmt.Sprintf("lease-%04d", i), Holder: me, TTL: time.Minute}
	}
	log.take()
	res, err := s.AcquireBatch(t.Context(), ps)
	require.NoError(t, err)
	require.Contains(t, [][]string{{"evalsha"}, {"evalsha", "eval"}}, log.take(),
		"one script call (and EVAL once, when the server had not cached the script yet)")
	require.Len(t, res, len(ps))
	var last store.Token
	for i, r := range res {
		if ps[i].Name == taken.Name {
			var he *store.HeldError
			require.ErrorAs(t, r.Err, &he)
			require.Equal(t, taken.Token, he.Token)
			continue
		}
		require.NoError(t, r.Err, ps[i].Name)
		require.Equal(t, ps[i].Name, r.Grant.Name)
		require.Greater(t, r.Grant.Token, last, "tokens grow in the batch's order")
		last = r.Grant.Token
	}
}

func TestList(t *testing.T) {
	t.Parallel()

	// More leases than one read chunk.
	t.Run("Many", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		holder := testutil.Holder(t, "holder")
		const n = 1500
		for i := range n {
			acquire(t, b.store, fmt.Sprintf("lease-%04d", n-1-i), holder, time.Minute)
		}
		records, err := b.store.List(t.Context())
		require.NoError(t, err)
		require.Len(t, records, n)
		for i, r := range records {
			require.Equal(t, fmt.Sprintf("lease-%04d", i), r.Name)
			require.Equal(t, store.StateHeld, r.State)
		}
	})

	// A prefix full of glob characters lists only its own leases, not those
	// of a prefix the unescaped pattern would match.
	t.Run("GlobPrefix", func(t *testing.T) {
		t.Parallel()
		c := redisserver.RedisClient(t)
		base := redisserver.RedisPrefix(t, c)
		weird := newStore(t, c, base+`x*?[a]\:`)
		plain := newStore(t, c, base+"xyza:")
		holder := testutil.Holder(t, "holder")
		acquire(t, weird, "mine", holder, time.Minute)
		acquire(t, plain, "theirs", holder, time.Minute)

		records, err := weird.List(t.Context())
		require.NoError(t, err)
		require.Len(t, records, 1)
		require.Equal(t, "mine", records[0].Name)
		r, err := weird.Get(t.Context(), "mine")
		require.NoError(t, err)
		require.Equal(t, store.StateHeld, r.State)
	})
}

// TestCounterDeleted deletes the token counter, as an eviction or a
// careless DEL would: the lease's record and the server's clock are floors
// for the next token. A counter that an operator (or a repair) had raised
// ahead of the clock goes backwards when deleted; a store that saw the
// greater tokens refuses a grant below them.
func TestCounterDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	holder := testutil.Holder(t, "holder")
	first := acquire(t, b.store, "first", holder, time.Minute)
	release(t, b.store, first)
	// Raise the counter about 11 days ahead of the server's clock, as
	// "INCRBY counter 1000000000000" would.
	require.NoError(t, b.client.IncrBy(ctx, b.keys.Counter, 1e12).Err())
	var seen store.Token
	for i := range 4 {
		g := acquire(t, b.store, fmt.Sprintf("other-%d", i), holder, time.Minute)
		require.Greater(t, g.Token, first.Token+1e12-1, "the raised counter hands out the tokens")
		seen = g.Token
	}
	require.NoError(t, b.client.Del(ctx, b.keys.Counter).Err())

	fresh := newStore(t, b.client, b.keys.Prefix)
	again := acquire(t, fresh, "first", holder, time.Minute)
	require.Greater(t, again.Token, first.Token, "the record's token and the clock are floors")

	_, err := b.store.Acquire(ctx, store.AcquireParams{Name: "new", Holder: holder, TTL: time.Minute})
	requireWentBackwards(t, err)
	r, err := b.store.Get(ctx, "new")
	require.NoError(t, err)
	require.Equal(t, store.StateReleased, r.State, "the refused tenure was given back")
	require.LessOrEqual(t, r.Token, seen)

	next := acquire(t, b.store, "new", holder, time.Minute)
	require.Greater(t, next.Token, seen+redisstore.CounterRepairMargin-1, "the counter was raised past every token the store saw")
}

func requireWentBackwards(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, redisstore.ErrTokenWentBackwards)
	require.NotErrorIs(t, err, store.ErrUnavailable, "a token that went backwards is not a retriable outage")
	require.NotErrorIs(t, err, store.ErrHeld)
	require.NotErrorIs(t, err, store.ErrInvalid)
	require.NotErrorIs(t, err, store.ErrClosed)
}

// TestRestartWithoutPersistence crashes a server that persists nothing:
// leases, counter and fences are gone, but the server's clock floors the
// next token, so tokens keep growing, for stores that saw the lost tokens
// and for stores made after the loss alike.
func TestRestartWithoutPersistence(t *testing.T) {
	t.Parallel()
	srv := redisserver.OwnRedis(t, redisserver.RedisConfig{})
	c := srv.Client(t)
	ctx := t.Context()
	prefix := "tenure_test:" + testutil.UniqueName(t) + ":"
	leader := newStore(t, c, prefix)
	follower := newStore(t, c, prefix)
	a, b := testutil.Holder(t, "a"), testutil.Holder(t, "b")

	var last store.Token
	for range 3 {
		g := acquire(t, leader, "job", a, time.Minute)
		require.Greater(t, g.Token, last)
		last = g.Token
		release(t, leader, g)
	}
	held := acquire(t, leader, "job", a, time.Minute)
	_, err := follower.Acquire(ctx, store.AcquireParams{Name: "job", Holder: b, TTL: time.Minute})
	var heldErr *store.HeldError
	require.ErrorAs(t, err, &heldErr)
	require.Equal(t, held.Token, heldErr.Token, "the follower has seen the holder's token")

	require.NoError(t, srv.Restart(t.Context()))
	require.Zero(t, c.Exists(ctx, leader.Keys().Counter).Val(), "the server lost its data")

	rs, err := leader.Renew(ctx, []store.RenewParams{{Name: "job", Holder: a, Token: held.Token, Seq: held.Seq, TTL: time.Minute}})
	require.NoError(t, err)
	require.False(t, rs[0].Renewed, "the lease was lost with the server's data")
	require.Equal(t, store.Grant{Name: "job"}, rs[0].Grant)

	next := acquire(t, follower, "job", b, time.Minute)
	require.Greater(t, next.Token, held.Token, "the clock floors the token: no repeat after the loss")
	release(t, follower, next)

	// A second crash, and a store made after it, which has seen no token:
	// the clock still floors the token.
	require.NoError(t, srv.Restart(t.Context()))
	newcomer := newStore(t, c, prefix)
	again := acquire(t, newcomer, "job", a, time.Minute)
	require.Greater(t, again.Token, next.Token, "a store without memory of the lost tokens gets a greater one")
}

// TestRestartWithAppendfsyncAlways crashes a server that syncs every write
// to its append-only file: leases, seq and counter survive.
func TestRestartWithAppendfsyncAlways(t *testing.T) {
	t.Parallel()
	srv := redisserver.OwnRedis(t, redisserver.RedisConfig{AppendFsyncAlways: true})
	c := srv.Client(t)
	ctx := t.Context()
	prefix := "tenure_test:" + testutil.UniqueName(t) + ":"
	s := newStore(t, c, prefix)
	a, b := testutil.Holder(t, "a"), testutil.Holder(t, "b")
	g := acquire(t, s, "job", a, time.Minute)
	rs, err := s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: a, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)

	require.NoError(t, srv.Restart(t.Context()))

	fresh := newStore(t, c, prefix)
	r, err := fresh.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, store.StateHeld, r.State, "the lease survived the crash")
	require.Equal(t, g.Token, r.Token)
	require.Equal(t, int64(2), r.Seq)
	rs, err = s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: a, Token: g.Token, Seq: 2, TTL: time.Minute}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed, "the holder renews across the crash")
	release(t, s, rs[0].Grant)

	next := acquire(t, fresh, "job", b, time.Minute)
	require.Greater(t, next.Token, g.Token, "the counter survived the crash")
}

func TestForeignKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	require.NoError(t, b.client.Set(ctx, b.keys.Record("job"), "not a hash", 0).Err())
	_, err := b.store.Get(ctx, "job")
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrUnavailable)
	require.ErrorContains(t, err, "another type")
	_, err = b.store.Acquire(ctx, store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "a"), TTL: time.Minute})
	require.ErrorContains(t, err, "another type")
}

func TestClosedClient(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	require.NoError(t, c.Close())
	s := newStore(t, c, "")
	_, err := s.Get(t.Context(), "job")
	require.ErrorIs(t, err, store.ErrClosed)
	require.ErrorContains(t, err, "go-redis client was closed")
}

// serverError is an error reply as go-redis reports it.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

func TestInterpretError(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err  error
		want error  // the sentinel it must match, or nil for none
		text string // what the message must say
	}{
		"Loading":      {err: serverError("LOADING Redis is loading the dataset in memory"), want: store.ErrUnavailable},
		"ReadOnly":     {err: serverError("READONLY You can't write against a read only replica."), want: store.ErrUnavailable},
		"Busy":         {err: serverError("BUSY Redis is busy running a script."), want: store.ErrUnavailable},
		"MasterDown":   {err: serverError("MASTERDOWN Link with MASTER is down"), want: store.ErrUnavailable},
		"OOM":          {err: serverError("OOM command not allowed when used memory > 'maxmemory'."), want: store.ErrUnavailable},
		"MaxClients":   {err: serverError("ERR max number of clients reached"), want: store.ErrUnavailable},
		"TryAgain":     {err: serverError("TRYAGAIN Multiple keys request during rehashing of slot"), want: store.ErrUnavailable},
		"Nil":          {err: redis.Nil, want: store.ErrUnavailable},
		"Deadline":     {err: context.DeadlineExceeded, want: store.ErrUnavailable},
		"Canceled":     {err: fmt.Errorf("read: %w", context.Canceled), want: store.ErrUnavailable},
		"EOF":          {err: io.EOF, want: store.ErrUnavailable},
		"Dial":         {err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, want: store.ErrUnavailable},
		"PoolTimeout":  {err: redis.ErrPoolTimeout, want: store.ErrUnavailable},
		"ClientClosed": {err: redis.ErrClosed, want: store.ErrClosed},
		"NoPerm":       {err: serverError("NOPERM User u has no permissions to run the 'evalsha' command"), text: "refused by the server"},
		"NoAuth":       {err: serverError("NOAUTH Authentication required."), text: "refused by the server"},
		"WrongPass":    {err: serverError("WRONGPASS invalid username-password pair"), text: "refused by the server"},
		"WrongType":    {err: serverError("WRONGTYPE Operation against a key holding the wrong kind of value script: x"), text: "another type"},
		"ScriptError":  {err: serverError("ERR user_script:1: Script attempted to access nonexistent global variable 'x'"), text: "nonexistent global"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := redisstore.InterpretError("get lease \"job\"", tc.err)
			require.ErrorIs(t, err, tc.err, "the cause is kept")
			require.ErrorContains(t, err, `redisstore: get lease "job"`)
			for _, sentinel := range []error{store.ErrUnavailable, store.ErrClosed, store.ErrHeld, store.ErrInvalid} {
				if sentinel == tc.want {
					require.ErrorIs(t, err, sentinel)
				} else {
					require.NotErrorIs(t, err, sentinel)
				}
			}
			if tc.text != "" {
				require.ErrorContains(t, err, tc.text)
			}
		})
	}
	require.NoError(t, redisstore.InterpretError("get", nil))
}
