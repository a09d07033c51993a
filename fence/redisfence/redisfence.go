package redisfence

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/redisstore"

	"github.com/redis/go-redis/v9"
)

// DefaultKeyPrefix is the prefix of fence keys when [Config.KeyPrefix] is
// empty.
const DefaultKeyPrefix = "tenure:fence:"

// MaxKeyPrefixLen is the longest [Config.KeyPrefix], in bytes.
const MaxKeyPrefixLen = 128

// MaxFields is the most field/value pairs one [Fencer.HSet] writes.
const MaxFields = 1000

//go:embed fence.lua
var fenceSrc string

var fenceScript = redis.NewScript(fenceSrc)

// Config configures a [Fencer]. It is passed by value; the zero value means
// the defaults.
type Config struct {
	// KeyPrefix is put in front of the resource name to make its fence key.
	// Default (empty): [DefaultKeyPrefix]. At most [MaxKeyPrefixLen] bytes
	// of UTF-8 without control characters. Every writer of one resource
	// must use the same prefix, or each would check a fence of its own.
	// A prefix whose keys could be the lease store's keys (of
	// StoreKeyPrefix, or of redisstore's default prefix) is refused
	// ([redisstore.Keys.Overlaps]).
	KeyPrefix string

	// StoreKeyPrefix is the [redisstore.Config.KeyPrefix] of the lease
	// store on the same server, when there is one. Default (empty):
	// unknown. When set, data keys starting with it are refused (a fenced
	// write there could forge or delete a lease, or the token counter);
	// when unknown, data keys that the default store would own
	// (redisstore.Keys.Owns: "tenure:lease:...", "tenure:held:...",
	// "tenure:token") are refused.
	StoreKeyPrefix string

	// CounterKey is the token counter of the lease store whose tokens the
	// fence takes, on the same server ([redisstore.Keys.Counter], "tenure:token"
	// for the default store). Default (empty): none. When set, every
	// fenced call reads it in the same atomic step and refuses a token
	// greater than it (a token the store never issued) with an error
	// matching [fence.ErrNotIssued], changing nothing. Leave it empty when
	// the tokens come from another store. On Redis Cluster it must hash to
	// the same slot as the fence and data keys.
	CounterKey string
}

// Fencer makes fenced writes to Redis keys. Its methods are safe for
// concurrent use. The package-level functions use the default one.
type Fencer struct {
	prefix string
	// storePrefix is Config.StoreKeyPrefix, "" when unknown.
	storePrefix string
	// store are the keys of the lease store: StoreKeyPrefix's, or the
	// default store's when it is unknown.
	store redisstore.Keys
	// counter is Config.CounterKey, "" when none.
	counter string
}

// New returns a Fencer with the fence keys cfg names.
func New(cfg Config) (*Fencer, error) {
	p := cfg.KeyPrefix
	if p == "" {
		p = DefaultKeyPrefix
	}
	switch {
	case len(p) > MaxKeyPrefixLen:
		return nil, fmt.Errorf("redisfence: %w: KeyPrefix %q is %d bytes long; the maximum is %d",
			store.ErrInvalid, p, len(p), MaxKeyPrefixLen)
	case !utf8.ValidString(p):
		return nil, fmt.Errorf("redisfence: %w: KeyPrefix %q is not valid UTF-8", store.ErrInvalid, p)
	case strings.ContainsFunc(p, isControl):
		return nil, fmt.Errorf("redisfence: %w: KeyPrefix %q contains a control character; choose another prefix",
			store.ErrInvalid, p)
	}
	keys, err := redisstore.Config{KeyPrefix: cfg.StoreKeyPrefix}.Keys()
	if err != nil {
		return nil, fmt.Errorf("redisfence: StoreKeyPrefix: %w", err)
	}
	if keys.Overlaps(p) {
		return nil, fmt.Errorf("redisfence: %w: KeyPrefix %q puts fence keys among the keys of the lease store with prefix %q (%q..., %q..., %q): a fence could overwrite a lease and a lease rewind a fence; choose another prefix",
			store.ErrInvalid, p, keys.Prefix, keys.Record(""), keys.Held(""), keys.Counter)
	}
	if strings.HasPrefix(cfg.CounterKey, p) || strings.ContainsFunc(cfg.CounterKey, isControl) || !utf8.ValidString(cfg.CounterKey) {
		return nil, fmt.Errorf("redisfence: %w: CounterKey %q must be the lease store's counter key (redisstore's Keys().Counter), outside the fence prefix %q and without control characters",
			store.ErrInvalid, cfg.CounterKey, p)
	}
	return &Fencer{prefix: p, storePrefix: cfg.StoreKeyPrefix, store: keys, counter: cfg.CounterKey}, nil
}

// checkDataKey refuses a data key that a fenced write must not touch: one
// among the fence keys (a data key equal to a fence key would rewind that
// fence) or among the lease store's keys.
func (f *Fencer) checkDataKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: key is empty", store.ErrInvalid)
	case strings.HasPrefix(key, f.prefix):
		return fmt.Errorf("%w: key %q starts with the fence key prefix %q: writing it could rewind or break a fence; keep data keys outside the prefix", store.ErrInvalid, key, f.prefix)
	case f.storePrefix != "" && strings.HasPrefix(key, f.storePrefix):
		return fmt.Errorf("%w: key %q starts with the lease store's key prefix %q: writing it could forge or end a lease; keep data keys outside the prefix", store.ErrInvalid, key, f.storePrefix)
	case f.store.Owns(key):
		return fmt.Errorf("%w: key %q is a key of the lease store with prefix %q: writing it could forge or end a lease; choose another key", store.ErrInvalid, key, f.store.Prefix)
	}
	return nil
}

// defaultFencer serves the package-level functions; the default Config is
// always valid, so defaultErr is nil.
var defaultFencer, defaultErr = New(Config{})

// Key returns the key holding the fence of resource: a string, the
// greatest token the resource accepted, in decimal. It never expires.
func (f *Fencer) Key(resource string) string { return f.prefix + resource }

// Check is [Fencer.Check] on the default prefix.
func Check(ctx context.Context, c redis.Scripter, resource string, tok store.Token) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.Check(ctx, c, resource, tok)
}

// Set is [Fencer.Set] on the default prefix.
func Set(ctx context.Context, c redis.Scripter, resource string, tok store.Token, key, value string, ttl time.Duration) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.Set(ctx, c, resource, tok, key, value, ttl)
}

// HSet is [Fencer.HSet] on the default prefix.
func HSet(ctx context.Context, c redis.Scripter, resource string, tok store.Token, key string, fields map[string]string) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.HSet(ctx, c, resource, tok, key, fields)
}

// Recorded is [Fencer.Recorded] on the default prefix.
func Recorded(ctx context.Context, c redis.Scripter, resource string) (store.Token, error) {
	if defaultErr != nil {
		return 0, defaultErr
	}
	return defaultFencer.Recorded(ctx, c, resource)
}

// Check records tok as accepted by resource when it is equal to or greater
// than every token resource accepted before, and fails with a
// [*store.FencedError] (matching [store.ErrFenced]) carrying resource, tok
// and the recorded token otherwise, changing nothing.
//
// Check writes nothing else: a write the caller makes afterwards is not
// atomic with it, and a superseded holder may check before the new one and
// write after it. Make the write itself with [Fencer.Set] or
// [Fencer.HSet], or in a script of your own that applies the same rule to
// [Fencer.Key]. Check is for moving the fence ahead of writes (a new holder
// shutting out its predecessors at once) and for asking whether a token is
// still current.
func (f *Fencer) Check(ctx context.Context, c redis.Scripter, resource string, tok store.Token) error {
	if err := validate(c, resource, tok); err != nil {
		return fmt.Errorf("redisfence: check: %w", err)
	}
	return f.run(ctx, c, fmt.Sprintf("check %q", resource), resource, tok, f.keys(f.Key(resource)), "check")
}

// Set writes value to key (SET, replacing whatever key held, its TTL
// included) and records tok as accepted by resource, in one atomic step,
// when tok is equal to or greater than every token resource accepted
// before. Otherwise it fails with a [*store.FencedError] (matching
// [store.ErrFenced]) and writes nothing. ttl 0 means no expiry; a positive
// ttl is rounded up to whole milliseconds.
//
// key and the fence key must live on the same server; on Redis Cluster they
// must hash to the same slot (see the package documentation).
func (f *Fencer) Set(ctx context.Context, c redis.Scripter, resource string, tok store.Token, key, value string, ttl time.Duration) error {
	if err := validate(c, resource, tok); err != nil {
		return fmt.Errorf("redisfence: set: %w", err)
	}
	if err := f.checkDataKey(key); err != nil {
		return fmt.Errorf("redisfence: set: %w", err)
	}
	switch {
	case ttl < 0:
		return fmt.Errorf("redisfence: set: %w: TTL %s must not be negative (0 means no expiry)", store.ErrInvalid, ttl)
	}
	ms := int64(ttl / time.Millisecond)
	if ttl%time.Millisecond != 0 {
		ms++
	}
	return f.run(ctx, c, fmt.Sprintf("set %q fenced by %q", key, resource), resource, tok,
		f.keys(f.Key(resource), key), "set", value, ms)
}

// HSet sets fields of the hash at key (HSET, leaving other fields alone)
// and records tok as accepted by resource, in one atomic step, when tok is
// equal to or greater than every token resource accepted before. Otherwise
// it fails with a [*store.FencedError] (matching [store.ErrFenced]) and
// writes nothing. fields holds 1 to [MaxFields] pairs. When key holds
// something other than a hash, HSet fails with the server's WRONGTYPE error
// and the fence stays where it was.
//
// key and the fence key must live on the same server; on Redis Cluster they
// must hash to the same slot (see the package documentation).
func (f *Fencer) HSet(ctx context.Context, c redis.Scripter, resource string, tok store.Token, key string, fields map[string]string) error {
	if err := validate(c, resource, tok); err != nil {
		return fmt.Errorf("redisfence: hset: %w", err)
	}
	if err := f.checkDataKey(key); err != nil {
		return fmt.Errorf("redisfence: hset: %w", err)
	}
	if err := validateHash(key, fields); err != nil {
		return fmt.Errorf("redisfence: hset: %w", err)
	}
	args := append(make([]any, 0, 1+2*len(fields)), "hset")
	args = appendFields(args, fields)
	return f.run(ctx, c, fmt.Sprintf("hset %q fenced by %q", key, resource), resource, tok,
		f.keys(f.Key(resource), key), args...)
}

// Recorded returns the greatest token resource accepted, 0 when it never
// accepted one.
func (f *Fencer) Recorded(ctx context.Context, c redis.Scripter, resource string) (store.Token, error) {
	if err := validate(c, resource, 1); err != nil {
		return 0, fmt.Errorf("redisfence: recorded: %w", err)
	}
	op := fmt.Sprintf("read the fence of %q", resource)
	_, recorded, err := f.call(ctx, c, op, 1, []string{f.Key(resource)}, "read")
	return recorded, err
}

// keys returns the script's keys: keys, then the counter when there is one.
func (f *Fencer) keys(keys ...string) []string {
	if f.counter != "" {
		keys = append(keys, f.counter)
	}
	return keys
}

// run calls the script and turns a refusal into a FencedError.
func (f *Fencer) run(ctx context.Context, c redis.Scripter, op, resource string, tok store.Token, keys []string, args ...any) error {
	accepted, recorded, err := f.call(ctx, c, op, tok, keys, args...)
	if err != nil {
		return err
	}
	if accepted == notIssued {
		return fmt.Errorf("redisfence: %s: %w: %w: token %d is above the lease store's counter %s (%d): the store never issued it; nothing was written",
			op, fence.ErrNotIssued, store.ErrInvalid, tok, f.counter, recorded)
	}
	if accepted != 1 {
		return fmt.Errorf("redisfence: %s: stop working under this token: %w", op,
			&store.FencedError{Resource: resource, Offered: tok, Recorded: recorded})
	}
	return nil
}

// notIssued is the script's first reply element for a token above the
// counter; the second is then the counter.
const notIssued = -1

// call runs the script with op args[0] and tok and decodes its reply: 1
// accepted, 0 refused as stale, [notIssued]; and the recorded token (the
// counter for notIssued).
func (f *Fencer) call(ctx context.Context, c redis.Scripter, op string, tok store.Token, keys []string, args ...any) (int64, store.Token, error) {
	argv := make([]any, 0, len(args)+3)
	argv = append(argv, args[0], strconv.FormatInt(int64(tok), 10), f.prefix, f.storePrefix)
	argv = append(argv, args[1:]...)
	reply, err := fenceScript.Run(ctx, c, keys, argv...).Slice()
	if err != nil {
		return 0, 0, interpretError(op, err)
	}
	if len(reply) != 2 {
		return 0, 0, unexpectedReply(op, reply)
	}
	accepted, ok1 := reply[0].(int64)
	text, ok2 := reply[1].(string)
	recorded, err := strconv.ParseInt(text, 10, 64)
	if !ok1 || !ok2 || err != nil || accepted < notIssued || accepted > 1 {
		return 0, 0, unexpectedReply(op, reply)
	}
	return accepted, store.Token(recorded), nil
}

// validateHash checks the key and the fields of a hash write.
func validateHash(key string, fields map[string]string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: key is empty", store.ErrInvalid)
	case len(fields) == 0:
		return fmt.Errorf("%w: no fields to set", store.ErrInvalid)
	case len(fields) > MaxFields:
		return fmt.Errorf("%w: %d fields; the maximum is %d", store.ErrInvalid, len(fields), MaxFields)
	}
	return nil
}

// appendFields appends fields to a script's arguments as field, value,
// field, value, ...
func appendFields(args []any, fields map[string]string) []any {
	for k, v := range fields {
		args = append(args, k, v)
	}
	return args
}

// validate checks what every call gets: a client, and a resource and
// token that pass [fence.ValidateWrite], the rule every fence applies.
func validate(c redis.Scripter, resource string, tok store.Token) error {
	if rc, ok := c.(*redis.Client); ok && rc == nil {
		c = nil
	}
	if c == nil {
		return fmt.Errorf("%w: client is nil", store.ErrInvalid)
	}
	return fence.ValidateWrite(resource, tok)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// interpretError is the one place where errors from go-redis become
// tenure's errors. Transport errors, timeouts, an empty reply and replies
// meaning "not now" match [store.ErrUnavailable]: the write may or may not
// have been made. A closed client matches [store.ErrClosed]. Any other
// server error (WRONGTYPE, ACL refusals) is returned wrapped.
func interpretError(op string, err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("redisfence: %s: %w: the go-redis client was closed: %w", op, store.ErrClosed, err)
	}
	var rerr redis.Error
	if errors.Is(err, redis.Nil) || !errors.As(err, &rerr) {
		return fmt.Errorf("redisfence: %s: %w (the write may have been made): %w", op, store.ErrUnavailable, err)
	}
	for _, p := range []string{"LOADING", "BUSY", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "OOM", "ERR max number of clients"} {
		if strings.HasPrefix(rerr.Error(), p) {
			return fmt.Errorf("redisfence: %s: %w (the write may have been made): %w", op, store.ErrUnavailable, err)
		}
	}
	return fmt.Errorf("redisfence: %s: %w", op, err)
}

// unexpectedReply reports a script reply of the wrong shape.
func unexpectedReply(op string, reply any) error {
	return fmt.Errorf("redisfence: %s: %w: unexpected reply %v from the server; does another program write these keys?",
		op, store.ErrUnavailable, reply)
}
