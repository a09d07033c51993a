// Package storeurl turns the store URL a user gives the tenure command
// (--store, or the TENURE_STORE environment variable) into an open
// [tenure.Store].
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
//     so several independent sets of leases can share one database.
//   - sqlite:PATH: an SQLite file on this host, created when missing. PATH
//     is taken literally (no percent-decoding); a leading ~/ means the home
//     directory; sqlite:///abs/path is accepted too.
//   - nothing: the SQLite file at $XDG_STATE_HOME/tenure/tenure.db, or
//     ~/.local/state/tenure/tenure.db ([sqlitestore.DefaultPath]).
//
// Other schemes, redis://, etcd:// and consul:// among them, are refused
// with an error naming the supported ones.
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
// [Parse] and [Resolve] fail with errors matching [tenure.ErrInvalid];
// [Target.Open] fails with errors matching [tenure.ErrInvalid] (bad input)
// or [tenure.ErrUnavailable] (the store could not be opened or reached).
package storeurl
