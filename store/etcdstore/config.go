package etcdstore

import (
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"
)

const (
	// DefaultKeyPrefix is the key prefix of a [Config] that sets none.
	DefaultKeyPrefix = "tenure/"

	// DefaultMaxTxnOps is the [Config.MaxTxnOps] of a Config that sets
	// none: etcd's own default for --max-txn-ops.
	DefaultMaxTxnOps = 128

	// MinTTL is the shortest lease this store accepts. etcd's minimum lease
	// TTL is 1.5 × its election timeout rounded up to whole seconds, 2 s at
	// the default --election-timeout of 1 s; the server silently raises
	// shorter leases to it, so the store refuses them instead.
	MinTTL = 2 * time.Second

	// MaxTTL is the longest lease this store accepts: etcd's maximum lease
	// TTL, 9,000,000,000 seconds.
	MaxTTL = 9_000_000_000 * time.Second
)

// opsPerRenewal is how many operations one entry of a renew batch needs in
// its nested transaction: three compares (token, seq, holder).
const opsPerRenewal = 3

// Config configures a [Store]. The zero value is ready to use; pass it by
// value.
type Config struct {
	// KeyPrefix is put before every key the store reads and writes, so
	// that several stores (or applications) can share one etcd cluster.
	// Two stores with the same prefix share their leases. Default:
	// [DefaultKeyPrefix]. By convention it ends with "/"; any bytes are
	// accepted.
	KeyPrefix string

	// MaxTxnOps is the most operations the etcd server accepts in one
	// transaction (its --max-txn-ops flag), counted as etcd counts it:
	// the widest branch of each transaction against what the transactions
	// around it leave. [Store.Renew] renews up to MaxTxnOps−3 leases in one
	// transaction, and more in nested groups, up to about (MaxTxnOps−3)²/4
	// per transaction; [Store.AcquireBatch] likewise with MaxTxnOps−7 and
	// [Store.ReleaseBatch] with MaxTxnOps−6 (at least one each); each sends
	// the transactions of one batch concurrently. Default: [DefaultMaxTxnOps], etcd's default. A
	// value above the server's makes large batches fail; a value below it
	// only costs transactions. Minimum: 4.
	MaxTxnOps int
}

// withDefaults returns cfg with its zero fields set to their defaults,
// or an error matching [store.ErrInvalid].
func (cfg Config) withDefaults() (Config, error) {
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = DefaultKeyPrefix
	}
	switch {
	case cfg.MaxTxnOps == 0:
		cfg.MaxTxnOps = DefaultMaxTxnOps
	case cfg.MaxTxnOps < opsPerRenewal+1:
		return cfg, fmt.Errorf("etcdstore: %w: MaxTxnOps (%d) must be at least %d (or 0 for etcd's default of %d)",
			store.ErrInvalid, cfg.MaxTxnOps, opsPerRenewal+1, DefaultMaxTxnOps)
	}
	return cfg, nil
}

// ttlSeconds checks ttl against etcd's limits and returns it in whole
// seconds, rounded up, as etcd takes it.
func ttlSeconds(name string, ttl time.Duration) (int64, error) {
	switch {
	case ttl < MinTTL:
		return 0, fmt.Errorf("%w: TTL %s of lease %q is below etcd's minimum lease TTL of %s; use at least %s",
			store.ErrInvalid, ttl, name, MinTTL, MinTTL)
	case ttl > MaxTTL:
		return 0, fmt.Errorf("%w: TTL %s of lease %q exceeds etcd's maximum lease TTL of %s",
			store.ErrInvalid, ttl, name, MaxTTL)
	}
	return int64((ttl + time.Second - 1) / time.Second), nil
}
