// Package storeopen opens the store a parsed store URL names
// ([storeurl.Target]) and gives the tenure command what it needs of it
// besides the [store.Store]: migrations, grants, the fleet registry, the
// store's wall clock. What each store does is its [storeurl.Backend]'s to
// say; this package asks that value and holds no knowledge of any store.
//
// # Opening
//
// [Open] has the Target's Backend first turn the URL's plain data into the
// store package's configuration (pgstore.Config, redisstore.Config, ...)
// and check it against that store's rules, so that a prefix, bucket or
// driver parameter the store refuses fails with an error matching
// [store.ErrInvalid] before anything is connected. It then reads the files
// the URL names (TLS certificates and keys, password, token and
// credentials files), connects with the store's client library and asks
// the server one round trip, so that an unreachable server, a refused
// login or a missing database fails at once with an error matching
// [store.ErrUnavailable]. The [Opened] store's Target masks the secrets
// read from files too.
//
// A PostgreSQL store gets a connection pool named "tenure" in
// pg_stat_activity (unless the URL names one); a MySQL store one
// database/sql handle; Redis, etcd, Consul, NATS and Kubernetes stores a
// client of their own, tuned so that no client logs to standard error.
// [Opened.Close] closes them, waiting at most [CloseTimeout].
//
// # Schema and grants
//
// [MigrationSQL], [GrantSQL] and [ReadGrantSQL] print what `tenure migrate
// --print` shows a DBA; [Opened.Migrate] applies the migration itself.
// [RegistryConfig] and [Opened.Registry] give the fleet registry that
// lives next to a PostgreSQL store.
//
// # Errors
//
// The errors of [Open] match [store.ErrInvalid] (bad input, a file that
// cannot be read, a PostgreSQL or MySQL server that refuses the URL's
// user, password, database or parameter) or [store.ErrUnavailable] (the store
// could not be opened or reached), or are the store's own (a NATS bucket not yet created
// matches [store.ErrNotMigrated]) passed through [storeurl.Target.Wrap].
// Every message of this package is redacted, on one line, and begins with
// "storeurl: ", as the parser's do: the user sees one prefix for every
// problem with the --store URL.
package storeopen
