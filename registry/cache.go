package registry

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// CacheConfig configures a [Cache]. It is passed by value; the zero value
// means the defaults.
type CacheConfig struct {
	// TTL is how long a positive ("alive") answer may be served after the
	// store gave it, on this process's monotonic clock. Default (zero):
	// [DefaultCacheTTL]. A cached answer is never served past the moment
	// the store would call the agent stale (its StaleAfter minus the age of
	// its heartbeat at the read), whatever the TTL. Longer means fewer store
	// reads and a longer window in which an agent that just died is still
	// called alive; it never makes a live agent look dead.
	TTL time.Duration
}

// Cache answers "is this agent alive?" on hot paths (promise P8): it keeps
// positives only. A cached "alive" is served within its TTL; an agent that
// is absent from the cache, or whose entry expired, is always asked of the
// store before anyone is told it is dead, and a "dead" or "unknown" answer
// is never cached. It is safe for concurrent use and starts no goroutines.
type Cache struct {
	reg *Registry
	ttl time.Duration
	// now reads the monotonic clock; tests replace it.
	now func() time.Time

	mu      sync.Mutex
	entries map[string]cacheEntry

	// storeReads counts lookups that went to the store.
	storeReads atomic.Int64
}

type cacheEntry struct {
	agent   Agent
	expires time.Time // monotonic reading
}

// NewCache returns an empty cache in front of reg.
func NewCache(reg *Registry, cfg CacheConfig) (*Cache, error) {
	if reg == nil {
		return nil, fmt.Errorf("registry: %w: cache: registry is nil", store.ErrInvalid)
	}
	switch {
	case cfg.TTL < 0:
		return nil, fmt.Errorf("registry: %w: cache TTL (%s) must be positive (zero means %s)", store.ErrInvalid, cfg.TTL, DefaultCacheTTL)
	case cfg.TTL == 0:
		cfg.TTL = DefaultCacheTTL
	}
	return &Cache{reg: reg, ttl: cfg.TTL, now: time.Now, entries: make(map[string]cacheEntry)}, nil
}

// Alive returns agent id if it is alive: from the cache when a positive
// younger than the TTL is there, otherwise from the store (and then caches
// the positive). When the store says the agent is stale or deregistered it
// returns an [*AgentDeadError]; when it never heard of it, an error matching
// [ErrUnknownAgent]; neither is cached. A store failure is returned as it
// is, never as a verdict.
func (c *Cache) Alive(ctx context.Context, id string) (Agent, error) {
	if err := ValidateAgentID(id); err != nil {
		return Agent{}, fmt.Errorf("registry: cache: %w", err)
	}
	c.mu.Lock()
	e, ok := c.entries[id]
	now := c.now()
	if ok && now.Before(e.expires) {
		c.mu.Unlock()
		return e.agent, nil
	}
	if ok {
		delete(c.entries, id)
	}
	c.mu.Unlock()

	sent := c.now()
	c.storeReads.Add(1)
	a, err := c.reg.Agent(ctx, id)
	if err != nil {
		return Agent{}, err
	}
	if !a.Alive {
		return Agent{}, a.deadError()
	}
	c.put(sent, a)
	return a, nil
}

// Refresh reads every agent from the store in one query and caches the live
// ones. Entries of agents the store called dead are dropped; they are asked
// again at their next lookup, like any absent agent.
func (c *Cache) Refresh(ctx context.Context) error {
	sent := c.now()
	c.storeReads.Add(1)
	agents, err := c.reg.Agents(ctx)
	if err != nil {
		return err
	}
	for _, a := range agents {
		if a.Alive {
			c.put(sent, a)
			continue
		}
		c.mu.Lock()
		delete(c.entries, a.ID)
		c.mu.Unlock()
	}
	return nil
}

// Forget drops the cached positive of agent id, if any: its next lookup asks
// the store. Use it when something (a failed call to the agent) suggests it
// may have died.
func (c *Cache) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, id)
}

// put caches a, read from the store by a query sent at sent: it is served
// until the TTL runs out or the agent would be stale by the store's clock,
// whichever is first, both counted from when the query was sent.
func (c *Cache) put(sent time.Time, a Agent) {
	life := min(c.ttl, a.remaining())
	if life <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[a.ID] = cacheEntry{agent: a, expires: sent.Add(life)}
}
