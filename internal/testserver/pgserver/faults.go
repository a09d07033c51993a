package pgserver

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/storetest"
)

// a proxy; the machine's server is not restarted.
func (h PostgresHarness) Faults() storetest.Faults {
	return storetest.Faults{NoRestart: testserver.NoRestartShared, NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		cfg := h.pool().Config()
		p := testserver.Proxy(tb, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
		host, port, err := net.SplitHostPort(p.Addr())
		if err != nil {
			tb.Fatalf("testserver: proxy address: %v", err)
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			tb.Fatalf("testserver: proxy port: %v", err)
		}
		cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(n), nil
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			tb.Fatalf("testserver: pool: %v", err)
		}
		tb.Cleanup(pool.Close)
		s := h.storeOn(tb, pool)
		return s, testserver.CutFault(p, nil, s)
	}}
}
