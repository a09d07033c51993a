package consulstore

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/store"
)

// Defaults and limits for [Config].
const (
	// DefaultKeyPrefix is the key prefix used when [Config.KeyPrefix] is
	// empty.
	DefaultKeyPrefix = "tenure/"
	// DefaultMinSessionTTL is the shortest session TTL Consul servers accept
	// unless configured otherwise (their session_ttl_min), and the value
	// used when [Config.MinSessionTTL] is zero.
	DefaultMinSessionTTL = 10 * time.Second
	// MaxSessionTTL is the longest session TTL Consul accepts. A lease
	// asked for with a longer TTL is refused with [store.ErrInvalid].
	MaxSessionTTL = 24 * time.Hour
	// MaxLockDelay is the longest lock-delay Consul applies; longer
	// settings are refused.
	MaxLockDelay = 60 * time.Second
	// MaxKeyPrefixLen is the longest [Config.KeyPrefix], in bytes.
	MaxKeyPrefixLen = 256
)

// Config configures a [Store]. The zero value is ready to use. It is passed
// by value; [New] validates it.
type Config struct {
	// KeyPrefix is put in front of every KV key the store reads and
	// writes; two prefixes are two independent sets of leases and tokens.
	// It is used as given, so it normally ends with "/"; it must not start
	// with "/". Default: [DefaultKeyPrefix] ("tenure/"). The token needs
	// key write on the prefix (and session write on the agent's node).
	KeyPrefix string

	// LockDelay is the lock-delay of the sessions the store creates: after
	// a session is invalidated without a clean release (its TTL ran out, an
	// operator destroyed it), Consul refuses to lock its keys again for
	// this long, by the leader's clock. A clean [Store.Release] is not
	// delayed. Default: 0, no delay. Consul's own default is 15 s, meant
	// for locks without fencing; tenure's leases carry a fencing token
	// that the resource checks, so the delay only slows failover. Set it
	// when the protected resource cannot check tokens and a little more
	// margin against a paused holder is worth a slower failover. At most
	// [MaxLockDelay].
	LockDelay time.Duration

	// MinSessionTTL is the shortest session TTL the Consul servers accept:
	// their session_ttl_min. A lease asked for with a shorter TTL is held
	// with a session of this TTL instead, and the store reports that longer
	// time as its remaining time, so a holder's trust window stays inside
	// what the servers grant. Default: [DefaultMinSessionTTL] (10 s,
	// Consul's default). Setting it below the servers' value makes short
	// leases fail with [store.ErrInvalid]; setting it above only makes
	// short leases longer.
	MinSessionTTL time.Duration
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.MinSessionTTL == 0 {
		c.MinSessionTTL = DefaultMinSessionTTL
	}
	return c
}

// validate checks a configuration whose defaults are filled in.
func (c Config) validate() error {
	switch p := c.KeyPrefix; {
	case len(p) > MaxKeyPrefixLen:
		return fmt.Errorf("consulstore: %w: KeyPrefix is %d bytes long; the maximum is %d", store.ErrInvalid, len(p), MaxKeyPrefixLen)
	case !utf8.ValidString(p):
		return fmt.Errorf("consulstore: %w: KeyPrefix %q is not valid UTF-8", store.ErrInvalid, p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("consulstore: %w: KeyPrefix %q starts with \"/\"; Consul keys do not, drop it", store.ErrInvalid, p)
	case strings.Contains(p, "//"):
		return fmt.Errorf("consulstore: %w: KeyPrefix %q contains an empty path segment (\"//\")", store.ErrInvalid, p)
	}
	for _, r := range c.KeyPrefix {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("consulstore: %w: KeyPrefix %q contains the control character %U", store.ErrInvalid, c.KeyPrefix, r)
		}
	}
	if c.LockDelay < 0 || c.LockDelay > MaxLockDelay {
		return fmt.Errorf("consulstore: %w: LockDelay (%s) must be between 0 and %s", store.ErrInvalid, c.LockDelay, MaxLockDelay)
	}
	if c.MinSessionTTL < 0 || c.MinSessionTTL > MaxSessionTTL {
		return fmt.Errorf("consulstore: %w: MinSessionTTL (%s) must be between 0 (the default, %s) and %s",
			store.ErrInvalid, c.MinSessionTTL, DefaultMinSessionTTL, MaxSessionTTL)
	}
	return nil
}

// sessionTTL returns the TTL of the session that holds a lease asked for
// with ttl: ttl rounded up to a whole millisecond and raised to
// MinSessionTTL. A ttl above [MaxSessionTTL] is refused.
func (c Config) sessionTTL(ttl time.Duration) (time.Duration, error) {
	if ttl > MaxSessionTTL {
		return 0, fmt.Errorf("%w: TTL %s exceeds Consul's maximum session TTL of %s", store.ErrInvalid, ttl, MaxSessionTTL)
	}
	if r := ttl % time.Millisecond; r != 0 {
		ttl += time.Millisecond - r
	}
	return max(ttl, c.MinSessionTTL), nil
}
