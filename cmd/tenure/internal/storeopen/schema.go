package storeopen

import (
	"context"
	"fmt"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

// SchemaCheck is the answer of `tenure migrate --check`: one line per
// part of the store's schema, and whether [Opened.Migrate] would change
// any of it.
type SchemaCheck struct {
	Lines  []string
	Behind bool
}

// CheckSchema reports whether the schema of the store t names is behind
// what [Opened.Migrate] would make, and changes nothing. PostgreSQL reports
// the store's and the fleet registry's migrations and functions, MySQL its
// migrations and procedures, NATS whether its bucket exists. An SQLite
// file is not opened (opening creates and upgrades it): it keeps its
// schema up to date itself. Redis, etcd, Consul, Kubernetes and the
// always-leader store keep no schema. Those report one line, never behind.
func CheckSchema(ctx context.Context, t storeurl.Target, opts Options) (SchemaCheck, error) {
	if t.Backend == nil {
		return SchemaCheck{}, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store target has no backend; make it with storeurl.Parse or storeurl.Resolve")
	}
	checker, ok := t.Backend.(storeurl.SchemaChecker)
	if !ok {
		return SchemaCheck{Lines: []string{fmt.Sprintf("the %s store %s keeps no schema: nothing to check", t.Backend.Name(), t.Display)}}, nil
	}
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	lines, behind, err := checker.CheckSchema(ctx, t, storeurl.OpenOptions{Timeout: timeout, CloseTimeout: CloseTimeout})
	if err != nil {
		return SchemaCheck{}, err
	}
	return SchemaCheck{Lines: lines, Behind: behind}, nil
}
