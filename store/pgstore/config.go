package pgstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
)

// Defaults for [Config].
const (
	// DefaultSchema is the schema used when [Config.Schema] is empty.
	DefaultSchema = "public"
	// DefaultTablePrefix is the prefix used when [Config.TablePrefix] is
	// empty.
	DefaultTablePrefix = "tenure_"
)

// maxIdentLen is the longest identifier PostgreSQL keeps (NAMEDATALEN-1);
// longer ones are silently truncated, which would make two configurations
// share objects.
const maxIdentLen = 63

// Name suffixes appended to [Config.TablePrefix]. The longest one bounds the
// prefix's length.
const (
	suffixLeases           = "leases"
	suffixFences           = "fences"
	suffixTokenSeq         = "token_seq"
	suffixMigrations       = "migrations"
	suffixFence            = "fence"
	suffixCheckLease       = "check_lease"
	suffixCheckLeaseStrict = "check_lease_strict"
	longestSuffix          = len(suffixCheckLeaseStrict)
)

// MaxTablePrefixLen is the longest [Config.TablePrefix], in bytes: the
// prefix plus the longest object name it is put in front of
// ("check_lease_strict") must fit PostgreSQL's 63-byte identifiers.
const MaxTablePrefixLen = maxIdentLen - longestSuffix

// Config configures a [Store] (and names the objects [pgfence] calls). It is
// passed by value; the zero value means the defaults: tables, sequence and
// functions named tenure_* in the schema public.
//
// Names are always quoted when put into SQL, so they keep their case and may
// contain spaces and punctuation; they may not contain control characters
// or '$'.
//
// [pgfence]: https://pkg.go.dev/github.com/tenure-dev/tenure/fence/pgfence
type Config struct {
	// Schema is the PostgreSQL schema holding the tables, the token sequence
	// and the fence functions. Default (empty): [DefaultSchema]. At most 63
	// bytes. [Store.Migrate] creates it when it is missing (which needs the
	// CREATE privilege on the database); the run-time role only needs USAGE
	// on it.
	Schema string

	// TablePrefix is put in front of every object's name: with the default
	// [DefaultTablePrefix] they are tenure_leases, tenure_fences,
	// tenure_token_seq, tenure_migrations and the functions tenure_fence,
	// tenure_check_lease and tenure_check_lease_strict. Several prefixes can
	// live side by side in one schema, each with its own leases, tokens and
	// fences. At most [MaxTablePrefixLen] bytes.
	TablePrefix string
}

// Objects names the database objects of one [Config], unquoted. Quote them
// as identifiers (pgx.Identifier{o.Schema, o.Leases}.Sanitize()) before
// putting them into SQL.
type Objects struct {
	Schema      string
	TablePrefix string
	// Leases is the table of leases, one row per name, never deleted from.
	Leases string
	// Fences is the table of fences: resource → highest token accepted.
	Fences string
	// TokenSeq is the sequence every new tenure's token is drawn from.
	TokenSeq string
	// Migrations records which migrations were applied.
	Migrations string
	// FenceFunc, CheckLeaseFunc and CheckLeaseStrictFunc are the fence
	// functions (see the package documentation).
	FenceFunc            string
	CheckLeaseFunc       string
	CheckLeaseStrictFunc string
	// Channel is the LISTEN/NOTIFY channel on which releases and takeovers
	// are announced, with the lease name as payload.
	Channel string
}

// Objects validates c and names its database objects.
func (c Config) Objects() (Objects, error) {
	c, err := c.normalize()
	if err != nil {
		return Objects{}, err
	}
	p := c.TablePrefix
	return Objects{
		Schema:               c.Schema,
		TablePrefix:          p,
		Leases:               p + suffixLeases,
		Fences:               p + suffixFences,
		TokenSeq:             p + suffixTokenSeq,
		Migrations:           p + suffixMigrations,
		FenceFunc:            p + suffixFence,
		CheckLeaseFunc:       p + suffixCheckLease,
		CheckLeaseStrictFunc: p + suffixCheckLeaseStrict,
		Channel:              channelName(c.Schema, p),
	}, nil
}

// normalize fills in defaults and validates c.
func (c Config) normalize() (Config, error) {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.TablePrefix == "" {
		c.TablePrefix = DefaultTablePrefix
	}
	if err := validateIdent("Schema", c.Schema, maxIdentLen); err != nil {
		return c, err
	}
	if err := validateIdent("TablePrefix", c.TablePrefix, MaxTablePrefixLen); err != nil {
		return c, err
	}
	return c, nil
}

func validateIdent(field, s string, maxLen int) error {
	switch {
	case len(s) > maxLen:
		return fmt.Errorf("pgstore: %w: %s %q is %d bytes long; the maximum is %d (PostgreSQL truncates longer names)",
			store.ErrInvalid, field, s, len(s), maxLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("pgstore: %w: %s %q is not valid UTF-8", store.ErrInvalid, field, s)
	case strings.Contains(s, "$"):
		return fmt.Errorf("pgstore: %w: %s %q contains '$', which names may not contain; choose another name",
			store.ErrInvalid, field, s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("pgstore: %w: %s %q contains the control character %U; choose another name",
				store.ErrInvalid, field, s, r)
		}
	}
	return nil
}

// channelName derives the notification channel from schema and prefix:
// readable when it fits PostgreSQL's 63 bytes, a hash of both otherwise.
func channelName(schema, prefix string) string {
	name := schema + "." + prefix + suffixLeases
	if len(name) <= maxIdentLen {
		return name
	}
	sum := sha256.Sum256([]byte(schema + "\x00" + prefix))
	return "tenure_" + hex.EncodeToString(sum[:16])
}

// ident quotes a schema-qualified name.
func ident(schema, name string) string {
	return pgx.Identifier{schema, name}.Sanitize()
}

// sqlNames holds the quoted names substituted into the embedded SQL, once,
// at construction.
type sqlNames struct {
	obj      Objects
	replacer *strings.Replacer
}

func newSQLNames(obj Objects) sqlNames {
	return sqlNames{
		obj: obj,
		replacer: strings.NewReplacer(
			"{{schema}}", pgx.Identifier{obj.Schema}.Sanitize(),
			"{{leases}}", ident(obj.Schema, obj.Leases),
			"{{fences}}", ident(obj.Schema, obj.Fences),
			"{{token_seq}}", ident(obj.Schema, obj.TokenSeq),
			"{{migrations}}", ident(obj.Schema, obj.Migrations),
			"{{fence_fn}}", ident(obj.Schema, obj.FenceFunc),
			"{{check_lease_fn}}", ident(obj.Schema, obj.CheckLeaseFunc),
			"{{check_lease_strict_fn}}", ident(obj.Schema, obj.CheckLeaseStrictFunc),
		),
	}
}

func (n sqlNames) render(sql string) string { return n.replacer.Replace(sql) }
