package mysqlstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/store"
)

// DefaultTablePrefix is the prefix used when [Config.TablePrefix] is empty.
const DefaultTablePrefix = "tenure_"

// maxIdentLen is the longest identifier MySQL and MariaDB accept, in
// characters, for tables, routines and databases.
const maxIdentLen = 64

// Name suffixes appended to [Config.TablePrefix]. The longest one bounds the
// prefix's length.
const (
	suffixLeases     = "leases"
	suffixFences     = "fences"
	suffixTokens     = "tokens"
	suffixMigrations = "migrations"
	suffixAcquire    = "acquire_or_wait"
	suffixWaiters    = "waiters"
	suffixRenew      = "renew"
	suffixRelease    = "release"
	suffixGet        = "get_lease"
	suffixList       = "list_leases"
	// suffixAcquireLease names the acquire procedure of libraries from
	// before the line, kept for their workers beside AcquireProc.
	suffixAcquireLease     = "acquire_lease"
	suffixFunctions        = "functions"
	suffixFence            = "fence"
	suffixCheckLease       = "check_lease"
	suffixCheckLeaseStrict = "check_lease_strict"
	longestSuffix          = len(suffixCheckLeaseStrict)
)

// MaxTablePrefixLen is the longest [Config.TablePrefix], in characters: the
// prefix plus the longest object name it is put in front of
// ("check_lease_strict") must fit MySQL's 64-character identifiers.
const MaxTablePrefixLen = maxIdentLen - longestSuffix

// Config configures a [Store] (and names the procedures [mysqlfence]
// calls). It is passed by value; the zero value means the defaults: tables
// and procedures named tenure_* in the connection's default database.
//
// Names are always quoted with backticks when put into SQL, so they keep
// their case and may contain spaces, quotes and punctuation; they may not
// contain control characters or characters outside Unicode's Basic
// Multilingual Plane, which MySQL refuses in identifiers.
//
// [mysqlfence]: https://pkg.go.dev/github.com/tenure-dev/tenure/fence/mysqlfence
type Config struct {
	// Database is the database holding the tables and procedures, put in
	// front of every name ("db"."tenure_leases"). Default (empty): the
	// connection's default database, the one its DSN names; names are
	// then left unqualified. At most 64 characters, and it may not end
	// with a space. [Store.Migrate] does not create it.
	Database string

	// TablePrefix is put in front of every object's name: with the default
	// [DefaultTablePrefix] they are the tables tenure_leases, tenure_fences,
	// tenure_tokens, tenure_waiters and tenure_migrations and the procedures
	// tenure_acquire_or_wait, tenure_renew, tenure_release, tenure_get_lease,
	// tenure_list_leases, tenure_fence,
	// tenure_check_lease and tenure_check_lease_strict. Several prefixes
	// can live side by side in one database, each with its own leases,
	// tokens and fences. At most [MaxTablePrefixLen] characters.
	TablePrefix string
}

// Objects names the database objects of one [Config], unquoted. [Quote]
// them before putting them into SQL.
type Objects struct {
	// Database is [Config.Database]: empty for the connection's default.
	Database    string
	TablePrefix string
	// Leases is the table of leases, one row per name.
	Leases string
	// Fences is the table of fences: resource → highest token accepted.
	Fences string
	// Tokens is the one-row table holding the token counter.
	Tokens string
	// Migrations records which migrations were applied, Functions which
	// revision of each procedure is installed (see the package
	// documentation).
	Migrations string
	Functions  string
	// Waiters is the line of followers waiting for each lease.
	Waiters string
	// The procedures the store calls.
	AcquireProc, RenewProc, ReleaseProc, GetProc, ListProc string
	// The fence procedures (see the package documentation).
	FenceProc, CheckLeaseProc, CheckLeaseStrictProc string
}

// Objects validates c and names its database objects.
func (c Config) Objects() (Objects, error) {
	prefix := c.TablePrefix
	if prefix == "" {
		prefix = DefaultTablePrefix
	}
	if c.Database != "" {
		if err := validateIdent("Database", c.Database, maxIdentLen); err != nil {
			return Objects{}, err
		}
		if strings.HasSuffix(c.Database, " ") {
			return Objects{}, fmt.Errorf("mysqlstore: %w: Database %q ends with a space, which MySQL refuses in names", store.ErrInvalid, c.Database)
		}
	}
	if err := validateIdent("TablePrefix", prefix, MaxTablePrefixLen); err != nil {
		return Objects{}, err
	}
	return Objects{
		Database:             c.Database,
		TablePrefix:          prefix,
		Leases:               prefix + suffixLeases,
		Fences:               prefix + suffixFences,
		Tokens:               prefix + suffixTokens,
		Migrations:           prefix + suffixMigrations,
		Functions:            prefix + suffixFunctions,
		Waiters:              prefix + suffixWaiters,
		AcquireProc:          prefix + suffixAcquire,
		RenewProc:            prefix + suffixRenew,
		ReleaseProc:          prefix + suffixRelease,
		GetProc:              prefix + suffixGet,
		ListProc:             prefix + suffixList,
		FenceProc:            prefix + suffixFence,
		CheckLeaseProc:       prefix + suffixCheckLease,
		CheckLeaseStrictProc: prefix + suffixCheckLeaseStrict,
	}, nil
}

// validateIdent checks a name (or the prefix of one) that is put into SQL
// as a quoted identifier: non-empty, at most maxLen characters, valid
// UTF-8 in the Basic Multilingual Plane, no control characters. field
// names it in the message.
func validateIdent(field, s string, maxLen int) error {
	switch {
	case s == "":
		return fmt.Errorf("mysqlstore: %w: %s is empty", store.ErrInvalid, field)
	case !utf8.ValidString(s):
		return fmt.Errorf("mysqlstore: %w: %s %q is not valid UTF-8", store.ErrInvalid, field, s)
	case utf8.RuneCountInString(s) > maxLen:
		return fmt.Errorf("mysqlstore: %w: %s %q is %d characters long; the maximum is %d (MySQL refuses longer names)",
			store.ErrInvalid, field, s, utf8.RuneCountInString(s), maxLen)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("mysqlstore: %w: %s %q contains the control character %U; choose another name", store.ErrInvalid, field, s, r)
		}
		if r > 0xffff {
			return fmt.Errorf("mysqlstore: %w: %s %q contains %U, outside the Basic Multilingual Plane, which MySQL refuses in names; choose another name",
				store.ErrInvalid, field, s, r)
		}
	}
	return nil
}

// Quote returns name quoted as a MySQL identifier, qualified with
// database when that is non-empty: `db`.`name`, every backtick doubled.
func Quote(database, name string) string {
	if database == "" {
		return quoteIdent(name)
	}
	return quoteIdent(database) + "." + quoteIdent(name)
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// Ident returns the object name quoted and qualified with o's database.
func (o Objects) Ident(name string) string { return Quote(o.Database, name) }

// lockName is the GET_LOCK name that serialises migrations of o: named
// locks are at most 64 characters, so it is a hash of the database and
// the prefix.
func (o Objects) lockName() string {
	sum := sha256.Sum256([]byte(o.Database + "\x00" + o.TablePrefix))
	return "tenure_migrate_" + hex.EncodeToString(sum[:16])
}

// nowUS is the server's clock in microseconds since the Unix epoch, read
// when the expression is evaluated (SYSDATE, not NOW: see the package
// documentation).
const nowUS = "CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED)"

// render substitutes the quoted names of o into sql's {{placeholders}}.
func (o Objects) render(sql string) string {
	return strings.NewReplacer(
		"{{leases}}", o.Ident(o.Leases),
		"{{fences}}", o.Ident(o.Fences),
		"{{tokens}}", o.Ident(o.Tokens),
		"{{migrations}}", o.Ident(o.Migrations),
		"{{acquire_lease}}", o.Ident(o.TablePrefix+suffixAcquireLease),
		"{{acquire_or_wait}}", o.Ident(o.AcquireProc),
		"{{waiters}}", o.Ident(o.Waiters),
		"{{renew}}", o.Ident(o.RenewProc),
		"{{release}}", o.Ident(o.ReleaseProc),
		"{{get_lease}}", o.Ident(o.GetProc),
		"{{list_leases}}", o.Ident(o.ListProc),
		"{{database_lit}}", o.databaseLiteral(),
		"{{leases_lit}}", quoteLiteral(o.Leases),
		"{{fence}}", o.Ident(o.FenceProc),
		"{{check_lease}}", o.Ident(o.CheckLeaseProc),
		"{{check_lease_strict}}", o.Ident(o.CheckLeaseStrictProc),
		"{{now_us}}", nowUS,
	).Replace(sql)
}

// databaseLiteral is o's database as an SQL expression: a string literal,
// or DATABASE() for the connection's default.
func (o Objects) databaseLiteral() string {
	if o.Database == "" {
		return "DATABASE()"
	}
	return quoteLiteral(o.Database)
}

// quoteLiteral spells s as an SQL string expression that reads the same
// whatever sql_mode says about backslashes (names may hold them): its
// UTF-8 bytes in hex.
func quoteLiteral(s string) string {
	return "CONVERT(X'" + hex.EncodeToString([]byte(s)) + "' USING utf8mb4)"
}
