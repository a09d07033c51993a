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
	suffixLine    = "line:"
	suffixWindows = "windows:"
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

// DefaultFenceKeyPrefix is redisfence.DefaultKeyPrefix, the prefix of the
// fence keys of redisfence's package-level functions (redisfence imports
// this package, so the constant is repeated here; a test keeps them
// equal). [Config.Keys] refuses a KeyPrefix whose keys overlap it.
const DefaultFenceKeyPrefix = "tenure:fence:"

// Keys names the keys and the channel of one [Config]. The package
// documentation describes what each holds.
type Keys struct {
	// Prefix is the key prefix in force.
	Prefix string
	// Counter is the token counter: a string holding the last token handed
	// out for any lease name, which every new tenure raises to
	// max(counter + 1, the server's TIME in microseconds). Never deleted.
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

// Line returns the key of the line of followers waiting for lease name: a
// hash of "label\ninstance" to "ticket until" (server microseconds).
func (k Keys) Line(name string) string { return k.Prefix + suffixLine + name }

// Windows returns the key of the windows of lease name
// ([Store.StartWindow]): a hash of window key to window, never expiring.
func (k Keys) Windows(name string) string { return k.Prefix + suffixWindows + name }

// Overlaps reports whether some key that starts with prefix could be one
// of the store's keys (a record, a held key or the counter): a fence or
// data key there would overwrite the store's state, and a store write would
// rewind a fence. It compares key spaces, not prefixes: every record key
// starts with Prefix+"lease:", every held key with Prefix+"held:", and the
// counter is Prefix+"token", so the spaces {prefix+x} and {Prefix+"lease:"+y}
// meet exactly when one of prefix and Prefix+"lease:" starts with the
// other (likewise for "held:"), and the counter is in {prefix+x} when it
// starts with prefix. So the default store ("tenure:") and the default
// fence prefix ("tenure:fence:") do not overlap, although one starts with
// the other; "tenure:lease:" as a fence prefix does. An empty prefix
// overlaps everything.
func (k Keys) Overlaps(prefix string) bool {
	for _, space := range []string{k.Prefix + suffixRecord, k.Prefix + suffixHeld, k.Prefix + suffixLine, k.Prefix + suffixWindows} {
		if strings.HasPrefix(space, prefix) || strings.HasPrefix(prefix, space) {
			return true
		}
	}
	return strings.HasPrefix(k.Prefix+suffixCounter, prefix)
}

// Owns reports whether key is, or could become, one of the store's keys: a
// record, a held key or the counter. redisfence refuses to write data
// keys a store owns.
func (k Keys) Owns(key string) bool {
	return strings.HasPrefix(key, k.Prefix+suffixRecord) || strings.HasPrefix(key, k.Prefix+suffixHeld) ||
		strings.HasPrefix(key, k.Prefix+suffixLine) || strings.HasPrefix(key, k.Prefix+suffixWindows) ||
		key == k.Prefix+suffixCounter
}

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
	k := Keys{Prefix: p, Counter: p + suffixCounter, Channel: p + suffixChannel}
	if k.Overlaps(DefaultFenceKeyPrefix) {
		return Keys{}, fmt.Errorf("redisstore: %w: KeyPrefix %q puts the store's keys (%q..., %q..., %q) among redisfence's fence keys (%q...): a fenced write could overwrite a lease, or a lease rewind a fence; choose another prefix",
			store.ErrInvalid, p, k.Prefix+suffixRecord, k.Prefix+suffixHeld, k.Counter, DefaultFenceKeyPrefix)
	}
	return k, nil
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
