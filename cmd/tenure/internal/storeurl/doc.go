// Package storeurl holds the stores the tenure command speaks to, one
// [Backend] value per store, and parses the store URL a user gives (--store,
// or the TENURE_STORE environment variable) into a [Target]: which store,
// where, with which of tenure's parameters, and how to show it without its
// secrets. [Parse] opens nothing and reads no file the URL names; package
// storeopen opens the store a Target names through its Backend, which
// converts the URL's plain data into the store package's configuration and
// checks it against that store's rules (a prefix's characters, a bucket's
// name, a Redis URL's options, ...).
//
// # Backends
//
// Each store is one file of this package: its URL's type ([*Postgres],
// [*MySQL], [*SQLite], [*Redis], [*Etcd], [*Consul], [*Nats],
// [*Kubernetes], [*Always]) with how it is parsed, opened, migrated and
// granted, how its wall clock is read, and its [Traits]: what the command's
// messages and checks (doctor, release --force, run's TTL floor) say of it.
// One static table, backends, chooses the value by scheme; nothing else in
// the tenure command compares or switches on a store's kind (a test walks
// the command's source to hold it to that). Adding a store is a file, its
// test, a line in that table and its form in [Supported].
//
// # URLs
//
//   - postgres://USER:PASSWORD@HOST:PORT/DATABASE?PARAMS (or postgresql://):
//     a PostgreSQL server, parsed by pgx with libpq's conventions, so
//     missing parts come from the PG* environment variables (PGHOST,
//     PGUSER, PGPASSWORD, ...), ~/.pgpass and the service file, and libpq
//     parameters such as sslmode and connect_timeout work. Three parameters
//     are tenure's own and are removed before the rest reaches pgx:
//     tenure_schema sets the schema (store/pgstore's Config.Schema,
//     default public) and tenure_prefix the table prefix (its
//     Config.TablePrefix, default tenure_), so several independent sets of
//     leases can share one database; tenure_listen says where the store
//     listens for notifications: the postgres:// URL of a direct
//     connection, escaped as a query value (its Config.ListenConfig; its
//     password is masked like the URL's own), or off (Config.NoListen).
//     Through PgBouncer in transaction mode the URL needs
//     default_query_exec_mode=exec (pgx's own parameter) and
//     tenure_listen; opening the store refuses it, saying so, without
//     them. The fleet registry lives in the same schema with the same
//     prefix.
//   - sqlite:PATH: an SQLite file on this host, created when missing. PATH
//     is taken literally (no percent-decoding); a leading ~/ means the home
//     directory; sqlite:///abs/path is accepted too.
//   - mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE (or mariadb://): MySQL or
//     MariaDB (port 3306 when omitted) through go-sql-driver/mysql, whose
//     DSN parameters (tls, timeout, ...) may follow as query parameters.
//     tenure_prefix sets the table prefix (store/mysqlstore's
//     Config.TablePrefix, default tenure_).
//   - redis://[USER:PASSWORD@]HOST:PORT[/DB] (rediss:// for TLS): one Redis
//     server, parsed by go-redis (its ParseURL, whose parameters such as
//     dial_timeout work) when the store is opened. tenure_prefix sets the
//     key prefix (store/redisstore's Config.KeyPrefix, default tenure:). A
//     rediss:// URL takes the TLS parameters below; any Redis URL takes
//     password_file.
//   - etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]: an etcd cluster's
//     endpoints (port 2379 when omitted, 127.0.0.1:2379 when no host is
//     given), plain gRPC unless a TLS parameter is given. tenure_prefix
//     sets the key prefix (store/etcdstore's Config.KeyPrefix, default
//     tenure/). etcd refuses leases shorter than 2 s. With --client-cert-auth
//     and authentication on, a client certificate whose common name is an
//     etcd user logs in as that user without a password.
//   - consul://HOST:PORT: the local Consul agent (port 8500 when omitted;
//     with no host, $CONSUL_HTTP_ADDR or 127.0.0.1:8500), over HTTPS when
//     a TLS parameter is given. The consul command's environment is
//     honoured (CONSUL_HTTP_TOKEN, CONSUL_HTTP_TOKEN_FILE, CONSUL_HTTP_SSL,
//     CONSUL_CACERT, ...); credentials in the URL are refused: the ACL
//     token comes from token_file or the environment. tenure_prefix sets
//     the key prefix (store/consulstore's Config.KeyPrefix, default
//     tenure/), tenure_session_ttl_min the servers' session_ttl_min
//     (Config.MinSessionTTL, default 10s) and tenure_lock_delay the
//     sessions' lock-delay (Config.LockDelay, default 0).
//   - nats://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]: NATS servers with
//     JetStream, 2.11 or later (port 4222 when omitted, 127.0.0.1:4222 when
//     no host is given; several servers of one cluster for failover), over
//     TLS when a TLS parameter is given. tenure_bucket sets the JetStream
//     KV bucket (store/natsstore's Config.Bucket, default tenure) and
//     tenure_replicas the replicas of a bucket `tenure migrate` creates.
//     The bucket must exist (`tenure migrate` creates it). A user needs a
//     password (in the URL
//     or password_file); a NATS token comes from token_file, a credentials
//     file (JWT and NKey) from creds_file.
//   - k8s://[NAMESPACE]: the Lease objects of a Kubernetes namespace
//     (store/k8sstore), reached as kubectl reaches them: the kubeconfig file
//     named by kubeconfig=PATH, else $KUBECONFIG, else ~/.kube/config,
//     else the pod's service account; context=NAME picks a context other
//     than the current one. With no namespace, the context's (or the
//     pod's) is used. tenure_prefix sets the prefix of the Lease objects'
//     names (store/k8sstore's Config.Prefix, default tenure). Credentials
//     in the URL are refused: they come
//     from the kubeconfig. `tenure migrate --print --grant ACCOUNT` prints
//     the Role and RoleBinding a worker's service account needs.
//   - always:REASON: store/alwaysleader, for genuinely idempotent jobs:
//     every holder leads at once. The reason is required (percent-encoding
//     allowed) and is shown by the tenure command's run and status.
//   - nothing: the SQLite file at $XDG_STATE_HOME/tenure/tenure.db, or
//     ~/.local/state/tenure/tenure.db ([sqlitestore.DefaultPath]).
//
// Other schemes are refused with an error naming the supported ones, and so
// are parameters an etcd or Consul URL does not know.
//
// # TLS and credentials
//
// PostgreSQL takes libpq's parameters, which pgx implements:
// sslmode=verify-full with sslrootcert=CA.pem checks the server's
// certificate and name; sslcert=CERT.pem and sslkey=KEY.pem present a
// client certificate (for pg_hba's cert method); passfile=PATH (or
// PGPASSFILE, ~/.pgpass, PGPASSWORD) keeps the password out of the URL.
//
// Redis (rediss://), etcd, Consul and NATS take tenure's parameters, whose
// files are read when the store is opened ([Parse] reads none; they are
// the backend's [Files]):
//
//   - tls_ca_file=PATH: PEM certificates of the authorities that vouch for
//     the server (default: the system's roots);
//   - tls_cert_file=PATH and tls_key_file=PATH, together: a client
//     certificate and its key;
//   - password_file=PATH (Redis, etcd, NATS): the password, so that it appears
//     neither in the URL nor in the process list; a trailing newline is
//     ignored. etcd and NATS need the user name in the URL with it;
//   - token_file=PATH (Consul, NATS): the ACL token or NATS token;
//   - creds_file=PATH (NATS): a credentials file, as nsc writes it.
//
// A TLS parameter on redis:// (not rediss://) is refused, as are a
// certificate without its key and a password given twice.
//
// # Minimum TTL
//
// The shortest TTL is each store's own knowledge ([store.MinTTLOf]: 2 s on
// etcd, the servers' session_ttl_min on Consul), and so is the unit it
// keeps TTLs in ([store.TTLUnitOf]: whole seconds on etcd and NATS), of
// which a TTL must be a whole number; the CLI asks the opened store, and
// takes from [Traits] only where the floor comes from, for its messages.
//
// # Secrets
//
// A password never appears in anything this package returns for printing:
// [Target.Display] shows the URL with every password (the user-info
// password and the password and sslpassword parameters) replaced by
// xxxxx, and every error message is passed through [Target.Redact], which
// also masks a password or token read from a file when the store is opened
// ([Target.WithSecrets]). Files are named in errors, never quoted; a token
// or key is never read into a message.
// Redact masks every occurrence of a secret, so a very short password
// also masks unrelated parts of a message.
//
// # Errors
//
// [Parse] and [Resolve] fail with errors matching [store.ErrInvalid]. Their
// messages begin with "storeurl: ", and so do those of the errors made
// with [Errorf] when the store is opened: the user sees one prefix for
// every problem with the --store URL.
package storeurl
