package httpfence

import (
	"context"
	"fmt"
	"sync"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/fence/pgfence"
	"github.com/tenure-dev/tenure/store/pgstore"
)

var (
	_ FenceStore = (*Memory)(nil)
	_ FenceStore = (*Postgres)(nil)
	_ FenceStore = FenceFunc(nil)
)

// Memory is a [FenceStore] in this process's memory, for tests, examples
// and services with a single instance. It forgets everything when the
// process ends, after which old tokens pass again. The zero value is ready
// to use; its methods are safe for concurrent use.
type Memory struct {
	mu     sync.Mutex
	fences map[string]store.Token
}

// NewMemory returns an empty in-memory fence store.
func NewMemory() *Memory {
	return &Memory{fences: make(map[string]store.Token)}
}

// Fence implements [FenceStore].
func (m *Memory) Fence(ctx context.Context, resource string, tok store.Token) error {
	if err := validate(resource, tok); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("httpfence: fence %q not attempted: %w: %w", resource, store.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fences == nil {
		m.fences = make(map[string]store.Token)
	}
	if recorded := m.fences[resource]; recorded > tok {
		return &store.FencedError{Resource: resource, Offered: tok, Recorded: recorded}
	}
	m.fences[resource] = tok
	return nil
}

// Recorded returns the highest token resource accepted, 0 if none.
func (m *Memory) Recorded(resource string) store.Token {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fences[resource]
}

// Postgres is a [FenceStore] on the fence table and function that
// [pgstore.Store.Migrate] installs, shared by every instance of a service
// that uses the same database, schema and prefix. Each check is one
// autocommit statement through [pgfence.Fencer.Fence]; the run-time role
// needs what [pgstore.Config.GrantSQL] grants.
type Postgres struct {
	q      pgfence.Querier
	fencer *pgfence.Fencer
}

// NewPostgres returns a fence store that runs its checks on q, normally a
// *pgxpool.Pool, against the functions migrated for cfg (only its Schema
// and TablePrefix matter). A nil q, or a cfg that [pgstore.New] would
// refuse, fails with an error matching [store.ErrInvalid].
func NewPostgres(q pgfence.Querier, cfg pgstore.Config) (*Postgres, error) {
	if q == nil {
		return nil, fmt.Errorf("httpfence: %w: querier is nil; pass a *pgxpool.Pool", store.ErrInvalid)
	}
	f, err := pgfence.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("httpfence: %w", err)
	}
	return &Postgres{q: q, fencer: f}, nil
}

// Fence implements [FenceStore]. Errors are pgfence's: missing functions
// match [store.ErrNotMigrated], an unreachable server
// [store.ErrUnavailable].
func (p *Postgres) Fence(ctx context.Context, resource string, tok store.Token) error {
	if err := validate(resource, tok); err != nil {
		return err
	}
	if p.fencer == nil {
		return fmt.Errorf("httpfence: %w: the Postgres fence store was not made by NewPostgres", store.ErrInvalid)
	}
	return p.fencer.Fence(ctx, p.q, resource, tok)
}
