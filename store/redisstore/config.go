package redisstore

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/store"
)

// DefaultKeyPrefix is the prefix used when [Config.KeyPrefix] is empty.
const DefaultKeyPrefix = "tenure:"

// MaxKeyPrefixLen is the longest [Config.KeyPrefix], in bytes.
const MaxKeyPrefixLen = 128

// Key suffixes appended to [Config.KeyPrefix].
const (
	suffixRecord  = "lease:"
	suffixHeld    = "held:"
	suffixCounter = "token"
	suffixChannel = "notify"
)

// Config configures a [Store]. It is passed by value; the zero value means
// the defaults.
type Config struct {
	// KeyPrefix is put in front of every key and of the notification
	// channel. Default (empty): [DefaultKeyPrefix]. At most
	// [MaxKeyPrefixLen] bytes of UTF-8 without control characters. Two
	// stores with different prefixes on one server have independent leases
	// and token counters; a prefix must not start with another store's
	// prefix followed by "lease:" or "held:", or the two would see each
	// other's keys. Changing it on a running system starts every counter
	// anew: do not, or raise the new counter first (see the package
	// documentation).
	KeyPrefix string
}

// Keys names the keys and the channel of one [Config]. The package
// documentation describes what each holds.
type Keys struct {
	// Prefix is the key prefix in force.
	Prefix string
	// Counter is the token counter: a string that INCR advances for every
	// new tenure of any lease name. Never deleted.
	Counter string
	// Channel is the pub/sub channel on which releases and takeovers are
	// announced, with the lease name as the message.
	Channel string
}

// Record returns the key of the record of lease name: a hash that never
// expires, naming the current or last tenure.
func (k Keys) Record(name string) string { return k.Prefix + suffixRecord + name }

// Held returns the key whose existence means lease name is held: a string
// holding the tenure's token, whose TTL (PX) is the lease's expiry.
func (k Keys) Held(name string) string { return k.Prefix + suffixHeld + name }

// recordPattern is the SCAN pattern matching every record key, with the
// prefix's glob characters escaped.
func (k Keys) recordPattern() string {
	var b strings.Builder
	for _, r := range k.Prefix + suffixRecord {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('*')
	return b.String()
}

// Keys validates c and names its keys.
func (c Config) Keys() (Keys, error) {
	p := c.KeyPrefix
	if p == "" {
		p = DefaultKeyPrefix
	}
	if err := validatePrefix(p); err != nil {
		return Keys{}, err
	}
	return Keys{Prefix: p, Counter: p + suffixCounter, Channel: p + suffixChannel}, nil
}

func validatePrefix(p string) error {
	switch {
	case len(p) > MaxKeyPrefixLen:
		return fmt.Errorf("redisstore: %w: KeyPrefix %q is %d bytes long; the maximum is %d",
			store.ErrInvalid, p, len(p), MaxKeyPrefixLen)
	case !utf8.ValidString(p):
		return fmt.Errorf("redisstore: %w: KeyPrefix %q is not valid UTF-8", store.ErrInvalid, p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("redisstore: %w: KeyPrefix %q contains the control character %U; choose another prefix",
				store.ErrInvalid, p, r)
		}
	}
	return nil
}
