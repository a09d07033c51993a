package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/fence/redisfence"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/store"
)

// tokenResource keeps the chains in hashes on the machine's Redis
// (TENURE_TEST_REDIS_URL), which no fault touches, and fences with the
// token alone (redisfence.HSet): the resource of the cells whose store
// has no transaction that could also check the lease (k8s, nats), and of
// the postgres-failover cell, whose chains must outlive the database's
// failovers (pgfailover.go). Every
// tenure moves the fence to its token before it reads the chain's head
// (begin), so a predecessor's late write is refused, or landed before the
// read and is seen. Clones share a token, which a token fence cannot tell
// apart: these cells do not clone (see faultKinds).
type tokenResource struct {
	hashChains
	fencer *redisfence.Fencer
}

func newTokenResource(addr, prefix string) (*tokenResource, error) {
	f, err := redisfence.New(redisfence.Config{KeyPrefix: prefix + "fence:"})
	if err != nil {
		return nil, err
	}
	return &tokenResource{hashChains: newHashChains(addr, prefix), fencer: f}, nil
}

// begin moves the fence to tok before the tenure's first read of the
// chain, shutting its predecessors out.
func (r *tokenResource) begin(ctx context.Context, _ *tenure.Lease, tok store.Token) error {
	return r.fencer.Check(ctx, r.rdb, resFenced, tok)
}

func (r *tokenResource) fenced(ctx context.Context, _ *tenure.Lease, tok store.Token, wid string) error {
	n, err := r.head(ctx, resFenced)
	if err != nil {
		return err
	}
	return r.fencer.HSet(ctx, r.rdb, resFenced, tok, r.keys[resFenced], next(n, tok, wid))
}

// withTokenResource completes openWorker for a cell whose chains are a
// tokenResource: st is the worker's store, and closeStore closes it and
// what it was opened over.
func withTokenResource(sp spec, st store.Store, closeStore func()) (store.Store, resource, func(), error) {
	res, err := newTokenResource(sp.RedisAddr, sp.DataPrefix)
	if err != nil {
		closeStore()
		return nil, nil, nil, err
	}
	return st, res, func() { closeStore(); res.close() }, nil
}

// setupTokenResource makes the reader of a cell whose chains are a
// tokenResource, and sets the spec its workers need to reach them.
func (c *cell) setupTokenResource(ctx context.Context, id string, cleanups *[]func()) (*tokenResource, error) {
	opts, err := redis.ParseURL(redisserver.RedisURL())
	if err != nil {
		return nil, fmt.Errorf("chaos: redis url: %w", err)
	}
	c.spec.RedisAddr, c.spec.DataPrefix = opts.Addr, "tenure-chaos:"+id+":"
	res, err := newTokenResource(c.spec.RedisAddr, c.spec.DataPrefix)
	if err != nil {
		return nil, err
	}
	if err := res.rdb.Ping(ctx).Err(); err != nil {
		res.close()
		return nil, fmt.Errorf("chaos: redis at %s: %w", c.spec.RedisAddr, err)
	}
	*cleanups = append(*cleanups, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = redisserver.RedisDeleteKeys(dctx, res.rdb, c.spec.DataPrefix)
		res.close()
	})
	return res, nil
}
