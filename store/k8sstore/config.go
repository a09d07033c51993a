package k8sstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/tenure-dev/tenure/store"
)

// DefaultPrefix is the object name prefix of a [Config] that names none.
const DefaultPrefix = "tenure"

// maxPrefixLen bounds [Config.Prefix]: it is a label value (at most 63
// bytes), and it starts every object name, which must stay below 253.
const maxPrefixLen = 40

// prefixPattern is what a prefix may be: a DNS label, as Kubernetes
// wants the start of an object name and a label value to be.
var prefixPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// Config configures a [Store]. The zero value is ready to use; pass it by
// value.
type Config struct {
	// Prefix starts the name of every Lease object the store writes and is
	// the value of their tenure.dev/prefix label: stores with the same
	// prefix in the same namespace share their leases, and the store lists
	// and watches only objects bearing its own. Default: [DefaultPrefix].
	// Lowercase letters, digits and '-', at most 40 bytes, starting and
	// ending with a letter or digit.
	Prefix string
}

// withDefaults returns cfg with its zero fields set to their defaults, or
// an error matching [store.ErrInvalid].
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if len(cfg.Prefix) > maxPrefixLen || !prefixPattern.MatchString(cfg.Prefix) {
		return cfg, fmt.Errorf("k8sstore: %w: Prefix %q must be at most %d lowercase letters, digits and '-', starting and ending with a letter or digit",
			store.ErrInvalid, cfg.Prefix, maxPrefixLen)
	}
	return cfg, nil
}

// Validate reports whether cfg is well formed, with an error matching
// [store.ErrInvalid] when it is not.
func (cfg Config) Validate() error {
	_, err := cfg.withDefaults()
	return err
}

// readableLen is how much of a lease name an object name shows.
const readableLen = 40

// ObjectName returns the name of the Lease object that keeps lease name
// under prefix: the prefix, the lease name's letters and digits in lower
// case (at most 40 of them, other runs of characters as one '-'), and 16
// hex digits of the name's SHA-256, which tell apart names that read
// alike. Lease names are any text; object names are DNS subdomains. The
// exact name is kept in the object's tenure.dev/name annotation.
func ObjectName(prefix, name string) string {
	sum := sha256.Sum256([]byte(name))
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('-')
	dash := false
	n := 0
	for _, r := range strings.ToLower(name) {
		if n == readableLen {
			break
		}
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
			n++
			dash = false
			continue
		}
		if !dash && n > 0 {
			b.WriteByte('-')
			n++
			dash = true
		}
	}
	if !dash && n > 0 {
		b.WriteByte('-')
	}
	b.WriteString(hex.EncodeToString(sum[:8]))
	return b.String()
}
