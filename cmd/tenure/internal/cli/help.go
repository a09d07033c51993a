package cli

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
)

func helpCommand() *command {
	return &command{
		summary:  "show how to use tenure or one of its commands",
		synopsis: "help [COMMAND]",
		words:    commandNames,
		about:    "Help prints the overview of tenure, or the flags of one command.",
		setup: func(fs *flag.FlagSet) action {
			return func(_ context.Context, e *env, args []string) error {
				switch len(args) {
				case 0:
					fmt.Fprint(e.stdout, overview())
					return nil
				case 1:
					cmd, ok := commandTable()[args[0]]
					if !ok {
						return usagef("help", "unknown command %q; the commands are %s", args[0], strings.Join(commandNames(), ", "))
					}
					fmt.Fprint(e.stdout, commandHelp(args[0], cmd))
					return nil
				}
				return usagef("help", "takes at most one command name, got %d arguments", len(args))
			}
		},
	}
}

// order lists the commands in the order help shows them; commands missing
// here come after, by name.
var order = []string{"run", "progress", "revoke-inherited", "status", "history", "release", "migrate", "fence", "doctor", "serve", "agents", "owner", "demo", "completion", "docs", "version", "help"}

func orderedNames() []string {
	names := commandNames()
	rank := func(n string) int {
		if i := slices.Index(order, n); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(names, func(a, b string) int { return rank(a) - rank(b) })
	return names
}

// overview is the text of `tenure help`.
func overview() string {
	return overviewIntro + commandList() + overviewStart + storeHelp + exitHelp
}

// overviewIntro begins the overview, up to the list of commands.
const overviewIntro = `tenure runs a job under a lease with a fencing token: one holder at a time,
and a holder that is paused, partitioned or superseded has its job stopped
before the store can give the lease to anyone else.

Usage:
`

// commandList lists the commands that are not hidden, in help's order:
// their synopses, then their summaries.
func commandList() string {
	var b strings.Builder
	table := commandTable()
	names := orderedNames()
	width := 0
	for _, n := range names {
		fmt.Fprintf(&b, "  tenure %s\n", table[n].synopsis)
		width = max(width, len(n))
	}
	b.WriteString("\nCommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, n, table[n].summary)
	}
	return b.String()
}

// overviewStart gives the global flags and where to start.
const overviewStart = `
Global flags, before or after the command's name:
  -v                    log the lease client's acquisitions and releases too
                        (level info); without it, only warnings and errors
  --log-format FORMAT   log lines on standard error as text (default) or json

Start with 'tenure demo': it needs no server and no setup.
`

// storeHelp says where the store comes from and how to write its URL.
const storeHelp = `
The store is given by --store URL, else by the TENURE_STORE environment
variable, else it is the SQLite file at $XDG_STATE_HOME/tenure/tenure.db
(~/.local/state/tenure/tenure.db when XDG_STATE_HOME is unset).

Store URLs:
  postgres://USER:PASSWORD@HOST:PORT/DATABASE?PARAMS  (or postgresql://…)
      PostgreSQL, with libpq's conventions: missing parts come from PGHOST,
      PGPORT, PGUSER, PGPASSWORD, PGDATABASE, ~/.pgpass; sslmode and the
      other libpq parameters work. tenure_schema=SCHEMA and
      tenure_prefix=PREFIX choose where tenure's tables and functions live
      (default: schema public, prefix tenure_). Passwords are never printed.
      TLS: sslmode=verify-full&sslrootcert=CA.pem; a client certificate:
      sslcert=CERT.pem&sslkey=KEY.pem; a password kept out of the URL:
      passfile=PATH or PGPASSWORD. Through PgBouncer in transaction mode:
      default_query_exec_mode=exec, and tenure_listen=URL (a direct
      connection for notifications, escaped) or tenure_listen=off.
  sqlite:PATH
      An SQLite file on this host, created when missing (one host only).
  mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE?PARAMS  (or mariadb://…)
      MySQL or MariaDB (port 3306 when omitted). go-sql-driver/mysql's DSN
      parameters work (tls, timeout, …); tenure_prefix=PREFIX sets the
      table prefix (default tenure_). No notifications: followers wake at a
      release through a user-level lock per lease, else at the expiry.
  redis://[USER:PASSWORD@]HOST:PORT[/DB]  (rediss://… for TLS)
      One Redis server (not a cluster). go-redis's URL parameters work
      (dial_timeout, …); tenure_prefix=PREFIX sets the key prefix
      (default tenure:).
  etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT…]
      An etcd v3 cluster's endpoints (port 2379 when omitted), plain gRPC
      unless a tls_ parameter is given. tenure_prefix=PREFIX sets the key
      prefix (default tenure/). etcd refuses leases shorter than 2s.
  consul://HOST:PORT
      The local Consul agent (port 8500 when omitted), HTTPS when a tls_
      parameter is given. CONSUL_HTTP_TOKEN(_FILE) and the consul command's
      other variables are honoured. tenure_prefix=PREFIX
      sets the key prefix (default tenure/), tenure_session_ttl_min=D the
      servers' session_ttl_min (default 10s: a shorter --ttl is refused),
      tenure_lock_delay=D the sessions' lock-delay (default 0).
  nats://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]
      NATS JetStream KV (nats-server 2.11 or later: per-key TTLs), port 4222
      when omitted. tenure_bucket=NAME sets the bucket (default tenure),
      which migrate creates (tenure_replicas=N for its stream);
      password_file=, token_file=, creds_file= keep secrets out of the URL.
      NATS refuses leases shorter than 1s and keeps whole seconds.
  k8s://[NAMESPACE]
      Kubernetes Lease objects (coordination.k8s.io/v1) of a namespace
      (default: the kubeconfig context's, or the pod's), reached as kubectl
      reaches them: kubeconfig=PATH (else $KUBECONFIG, ~/.kube/config, the
      pod's service account), context=NAME; tenure_prefix=PREFIX sets the
      objects' name prefix (default tenure). migrate --print --grant
      ACCOUNT prints the least-privilege Role and RoleBinding.
  always:REASON
      No store: every holder leads at once, for genuinely idempotent jobs.
      The written REASON (percent-encoding allowed) is required and is
      printed by run and status. Tokens are constant: nothing is fenced.
  TLS and secrets for rediss://, etcd:// and consul://: tls_ca_file=CA.pem
  (the server's authority), tls_cert_file=CERT.pem&tls_key_file=KEY.pem (a
  client certificate), password_file=PATH (Redis, etcd: the password out of
  the URL), token_file=PATH (Consul's ACL token). Secrets are never printed.
  The fleet registry (agents, owner) lives in PostgreSQL only. Redis, etcd
  and Consul keep no schema: migrate has nothing to do there.

`

// exitHelp lists the exit codes.
const exitHelp = `Exit codes:
  0      success; under run, the command's own exit status passes through
         (128+N when signal N ended it); owner: the owner is alive;
         release: the lease is not held or does not exist
  1      any other error; demo: the story did not come out as it must;
         doctor: a check FAILed (the store unreachable included)
  3      owner: the resource has no owner
  4      owner: the resource's owner is dead (do not place it elsewhere)
  64     usage: unknown command or flag (or a long flag with one dash:
         -store for --store), bad duration, name, store URL (one the
         server refuses: user, password, database) or --health/--http
         address, a --grace that does not fit --ttl, a --ttl below the store's
         minimum, or agents/owner on a store other than PostgreSQL
  69     the store could not be opened or reached
  75     not acquired: the lease is held by someone else, or --wait-timeout
         ran out; the message names the holder, its token and its remaining
         time by the store's clock
  78     the store is not migrated, or (migrate --check) behind this
         version: run tenure migrate
  79     the lease was lost while the command ran, and the command was
         stopped (SIGTERM, then SIGKILL after --grace)
  126    the command could not be executed; 127: it was not found
  128+N  run was interrupted by signal N while waiting for the lease, or
         demo by signal N

Run 'tenure help COMMAND' for the flags of a command.
`

// hiddenFlag begins the usage of a flag that help does not show: it is
// internal to tenure (run --watchdog).
const hiddenFlag = "internal: "

// commandHelp is the text of `tenure help NAME` and `tenure NAME -h`.
func commandHelp(name string, cmd *command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: tenure %s\n\n%s\n", cmd.synopsis, cmd.about)
	if cmd.onHost != nil {
		fmt.Fprintf(&b, "\nOn this host: %s\n", cmd.onHost())
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cmd.setup(fs)
	if !cmd.raw {
		new(globalFlags).define(fs)
	}
	if docs := flagDocs(fs); len(docs) > 0 {
		b.WriteString("\nFlags:\n")
		for _, d := range docs {
			b.WriteString(d.String())
		}
	}
	return b.String()
}

// flagDoc is a flag as help shows it.
type flagDoc struct {
	name  string // without dashes
	arg   string // the argument's name (URL), or "" for a switch
	def   string // the default shown, or ""
	usage string
}

// flagDocs are the flags of fs that help shows (not the internal ones),
// by name.
func flagDocs(fs *flag.FlagSet) []flagDoc {
	var docs []flagDoc
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, hiddenFlag) {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		docs = append(docs, flagDoc{name: f.Name, arg: arg, def: shownDefault(f), usage: usage})
	})
	return docs
}

// head is the flag's line in help: "--name ARG (default D)".
func (d flagDoc) head() string {
	line := "--" + d.name
	if d.arg != "" {
		line += " " + d.arg
	}
	if d.def != "" {
		line += " (default " + d.def + ")"
	}
	return line
}

func (d flagDoc) String() string {
	return fmt.Sprintf("  %s\n      %s\n", d.head(), d.usage)
}

// shownDefault is the default of f that help shows: none for an empty,
// false or zero one, or when the usage says the default itself.
func shownDefault(f *flag.Flag) string {
	if f.DefValue == "false" || f.DefValue == "0s" || strings.Contains(f.Usage, "(default") {
		return ""
	}
	return f.DefValue
}
