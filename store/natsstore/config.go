package natsstore

import (
	"fmt"
	"regexp"
	"time"

	"github.com/tenure-dev/tenure/store"
)

const (
	// DefaultBucket is the KV bucket of a [Config] that names none.
	DefaultBucket = "tenure"

	// MinTTL is the shortest lease this store accepts: nats-server refuses
	// message TTLs below one second.
	MinTTL = time.Second

	// MarkerTTL is how long the server keeps the marker it leaves when a
	// lease's TTL runs out (the bucket's LimitMarkerTTL): long enough for
	// every watcher to see it, one second being the server's minimum.
	MarkerTTL = 5 * time.Second
)

// bucketName is what nats-server accepts as a KV bucket name.
var bucketName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Config configures a [Store]. The zero value is ready to use; pass it by
// value.
type Config struct {
	// Bucket is the JetStream KV bucket the leases live in (its stream is
	// KV_<Bucket>). Stores with the same bucket share their leases; the
	// bucket may hold nothing else. Default: [DefaultBucket]. Letters,
	// digits, '-' and '_' only.
	Bucket string

	// Replicas is how many servers of a cluster keep the bucket when
	// [Migrate] creates it: 1 (the default) on a single server, 3 or 5 in
	// a cluster, where a bucket of 1 replica loses its leases, not its
	// tokens' order, when that server's disk or power does (see the
	// package doc's failure modes). Ignored by [Open].
	Replicas int
}

// withDefaults returns cfg with its zero fields set to their defaults, or
// an error matching [store.ErrInvalid].
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if !bucketName.MatchString(cfg.Bucket) {
		return cfg, fmt.Errorf("natsstore: %w: Bucket %q may hold only letters, digits, '-' and '_'", store.ErrInvalid, cfg.Bucket)
	}
	switch {
	case cfg.Replicas == 0:
		cfg.Replicas = 1
	case cfg.Replicas < 0 || cfg.Replicas > 5:
		return cfg, fmt.Errorf("natsstore: %w: Replicas (%d) must be between 1 and 5 (or 0 for 1)", store.ErrInvalid, cfg.Replicas)
	}
	return cfg, nil
}

// ttlSeconds checks ttl against the server's limit and returns it rounded
// up to whole seconds, as nats-server keeps message TTLs (it truncates a
// finer one, which would end a lease early).
func ttlSeconds(name string, ttl time.Duration) (time.Duration, error) {
	if ttl < MinTTL {
		return 0, fmt.Errorf("%w: TTL %s of lease %q is below nats-server's minimum message TTL of %s; use at least %s",
			store.ErrInvalid, ttl, name, MinTTL, MinTTL)
	}
	return (ttl + time.Second - 1).Truncate(time.Second), nil
}

// Validate reports whether cfg is well formed, with an error matching
// [store.ErrInvalid] when it is not.
func (cfg Config) Validate() error {
	_, err := cfg.withDefaults()
	return err
}
