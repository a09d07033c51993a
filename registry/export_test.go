package registry

import (
	"context"
	"time"
)

// SetHeartbeatAge makes agent id's last heartbeat age old by the store's
// clock, as if it had not heartbeated since. It writes the test's own
// schema; the registry reads ages with clock_timestamp(), so this is what
// the store would say after that much silence.
func SetHeartbeatAge(ctx context.Context, r *Registry, id string, age time.Duration) error {
	_, err := r.pool.Exec(ctx,
		r.render("UPDATE {{agents}} SET heartbeat_at = clock_timestamp() - $2::bigint * interval '1 microsecond' WHERE id = $1"),
		id, age.Microseconds())
	return err
}

// HeartbeatLosingReply heartbeats with g and returns what the process would
// hold if the reply had been lost: g remembering the heartbeat, whose
// outcome it does not know.
func HeartbeatLosingReply(ctx context.Context, r *Registry, g Registration) (Registration, error) {
	nonce := "lost-" + RegisterInstance()
	if _, err := r.heartbeat(ctx, g, nonce); err != nil {
		return Registration{}, err
	}
	return g.withPending(nonce), nil
}

// SetCacheClock makes c read time from now instead of time.Now.
func SetCacheClock(c *Cache, now func() time.Time) { c.now = now }

// CacheStoreReads returns how many lookups c sent to the store.
func CacheStoreReads(c *Cache) int64 { return c.storeReads.Load() }

// MigrateTo applies the registry's migrations up to version only, as an
// older library would have.
func MigrateTo(ctx context.Context, r *Registry, version int) error {
	set, err := migrations(r.obj)
	if err != nil {
		return err
	}
	set.Migrations = set.Migrations[:version]
	return set.Run(ctx, r.pool)
}
