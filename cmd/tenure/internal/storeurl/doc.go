// Package storeurl turns the store URL a user gives the tenure command
// (--store, or the TENURE_STORE environment variable) into an open
// [store.Store].
//
// # URLs
//
//   - postgres://USER:PASSWORD@HOST:PORT/DATABASE?PARAMS (or postgresql://):
//     a PostgreSQL server, parsed by pgx with libpq's conventions, so
//     missing parts come from the PG* environment variables (PGHOST,
//     PGUSER, PGPASSWORD, ...), ~/.pgpass and the service file, and libpq
//     parameters such as sslmode and connect_timeout work. Two parameters
//     are tenure's own and are removed before the rest reaches pgx:
//     tenure_schema sets [pgstore.Config.Schema] (default public) and
//     tenure_prefix sets [pgstore.Config.TablePrefix] (default tenure_),
//     so several independent sets of leases can share one database. The
//     fleet registry ([registry.Config]) lives in the same schema with the
//     same prefix.
//   - sqlite:PATH: an SQLite file on this host, created when missing. PATH
//     is taken literally (no percent-decoding); a leading ~/ means the home
//     directory; sqlite:///abs/path is accepted too.
//   - mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE (or mariadb://): MySQL or
//     MariaDB (port 3306 when omitted) through go-sql-driver/mysql, whose
//     DSN parameters (tls, timeout, ...) may follow as query parameters.
//     tenure_prefix sets [mysqlstore.Config.TablePrefix] (default tenure_).
//   - redis://[USER:PASSWORD@]HOST:PORT[/DB] (rediss:// for TLS): one Redis
//     server, parsed by go-redis ([redis.ParseURL], whose parameters such
//     as dial_timeout work). tenure_prefix sets
//     [redisstore.Config.KeyPrefix] (default tenure:).
//   - etcd://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]: an etcd cluster's
//     endpoints (port 2379 when omitted, 127.0.0.1:2379 when no host is
//     given), plain gRPC. tenure_prefix sets [etcdstore.Config.KeyPrefix]
//     (default tenure/). etcd refuses leases shorter than
//     [etcdstore.MinTTL].
//   - consul://HOST:PORT: the local Consul agent (port 8500 when omitted;
//     with no host, $CONSUL_HTTP_ADDR or 127.0.0.1:8500). The consul
//     command's environment is honoured (CONSUL_HTTP_TOKEN,
//     CONSUL_HTTP_SSL, CONSUL_CACERT, ...); credentials in the URL are
//     refused. tenure_prefix sets [consulstore.Config.KeyPrefix] (default
//     tenure/), tenure_session_ttl_min the servers' session_ttl_min
//     ([consulstore.Config.MinSessionTTL], default 10s) and
//     tenure_lock_delay the sessions' lock-delay
//     ([consulstore.Config.LockDelay], default 0).
//   - always:REASON: [alwaysleader], for genuinely idempotent jobs: every
//     holder leads at once. The reason is required (percent-encoding
//     allowed) and is shown by the tenure command's run and status.
//   - nothing: the SQLite file at $XDG_STATE_HOME/tenure/tenure.db, or
//     ~/.local/state/tenure/tenure.db ([sqlitestore.DefaultPath]).
//
// Other schemes are refused with an error naming the supported ones, and so
// are parameters an etcd or Consul URL does not know.
//
// # Minimum TTL
//
// The shortest TTL is each store's own knowledge ([store.MinTTLOf]: 2 s on
// etcd, the servers' session_ttl_min on Consul); the CLI asks the opened
// store, not this package.
//
// # Secrets
//
// A password never appears in anything this package returns for printing:
// [Target.Display] shows the URL with every password (the user-info
// password and the password and sslpassword parameters) replaced by
// xxxxx, and every error message is passed through [Target.Redact].
//
// # Errors
//
// [Parse] and [Resolve] fail with errors matching [store.ErrInvalid];
// [Target.Open] fails with errors matching [store.ErrInvalid] (bad input)
// or [store.ErrUnavailable] (the store could not be opened or reached).
package storeurl
