package pgstore

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/tenure-dev/tenure/internal/pgkit"
)

// Defaults for [Config].
const (
	// DefaultSchema is the schema used when [Config.Schema] is empty.
	DefaultSchema = pgkit.DefaultSchema
	// DefaultTablePrefix is the prefix used when [Config.TablePrefix] is
	// empty.
	DefaultTablePrefix = pgkit.DefaultTablePrefix
)

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
	suffixAcquire          = "acquire"
	suffixRenew            = "renew"
	suffixRelease          = "release"
	suffixGet              = "get_lease"
	suffixList             = "list_leases"
	// suffixGet003 and suffixList003 name the get and list functions of
	// migration 003, which migration 005 replaces with GetFunc and
	// ListFunc (their results gained the payload, and a function cannot
	// change its result in place).
	suffixGet003       = "get"
	suffixList003      = "list"
	suffixFenceForeign = "fence_foreign"
	suffixFenceReset   = "fence_reset"
	suffixFenceResets  = "fence_resets"
	longestSuffix      = len(suffixCheckLeaseStrict)
)

// MaxTablePrefixLen is the longest [Config.TablePrefix], in bytes: the
// prefix plus the longest object name it is put in front of
// ("check_lease_strict") must fit PostgreSQL's 63-byte identifiers.
const MaxTablePrefixLen = pgkit.MaxIdentLen - longestSuffix

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
	// tenure_token_seq, tenure_migrations, tenure_fence_resets and the
	// functions tenure_acquire, tenure_renew, tenure_release,
	// tenure_get_lease, tenure_list_leases, tenure_fence, tenure_fence_foreign, tenure_fence_reset,
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
	// FenceResets records every operator reset of a fence (who, when,
	// why, old and new token).
	FenceResets string
	// AcquireFunc, RenewFunc, ReleaseFunc, GetFunc and ListFunc are the
	// functions the store calls: the run-time role's only way to the
	// leases (see the package documentation).
	AcquireFunc string
	RenewFunc   string
	ReleaseFunc string
	GetFunc     string
	ListFunc    string
	// FenceFunc, CheckLeaseFunc and CheckLeaseStrictFunc are the fence
	// functions, FenceForeignFunc the fence for tokens of another store
	// and FenceResetFunc the operator's repair (see the package
	// documentation).
	FenceFunc            string
	CheckLeaseFunc       string
	CheckLeaseStrictFunc string
	FenceForeignFunc     string
	FenceResetFunc       string
	// Channel is the LISTEN/NOTIFY channel on which releases and takeovers
	// are announced, with the lease name as payload.
	Channel string
}

// Objects validates c and names its database objects.
func (c Config) Objects() (Objects, error) {
	ns, err := c.namespace()
	if err != nil {
		return Objects{}, err
	}
	return Objects{
		Schema:               ns.Schema,
		TablePrefix:          ns.Prefix,
		Leases:               ns.Name(suffixLeases),
		Fences:               ns.Name(suffixFences),
		TokenSeq:             ns.Name(suffixTokenSeq),
		Migrations:           ns.Name(suffixMigrations),
		FenceResets:          ns.Name(suffixFenceResets),
		AcquireFunc:          ns.Name(suffixAcquire),
		RenewFunc:            ns.Name(suffixRenew),
		ReleaseFunc:          ns.Name(suffixRelease),
		GetFunc:              ns.Name(suffixGet),
		ListFunc:             ns.Name(suffixList),
		FenceFunc:            ns.Name(suffixFence),
		CheckLeaseFunc:       ns.Name(suffixCheckLease),
		CheckLeaseStrictFunc: ns.Name(suffixCheckLeaseStrict),
		FenceForeignFunc:     ns.Name(suffixFenceForeign),
		FenceResetFunc:       ns.Name(suffixFenceReset),
		Channel:              channelName(ns.Schema, ns.Prefix),
	}, nil
}

// namespace fills in defaults and validates c.
func (c Config) namespace() (pgkit.Namespace, error) {
	return pgkit.NewNamespace("pgstore", c.Schema, c.TablePrefix, longestSuffix)
}

func (o Objects) namespace() pgkit.Namespace {
	return pgkit.Namespace{Schema: o.Schema, Prefix: o.TablePrefix}
}

// channelName derives the notification channel from schema and prefix:
// readable when it fits PostgreSQL's 63 bytes, a hash of both otherwise.
func channelName(schema, prefix string) string {
	name := schema + "." + prefix + suffixLeases
	if len(name) <= pgkit.MaxIdentLen {
		return name
	}
	sum := sha256.Sum256([]byte(schema + "\x00" + prefix))
	return "tenure_" + hex.EncodeToString(sum[:16])
}

// renderer returns the function that substitutes the quoted names into the
// embedded SQL, once, at construction.
func (o Objects) renderer() func(sql string) string {
	return o.namespace().Renderer(map[string]string{
		"leases":                o.Leases,
		"fences":                o.Fences,
		"token_seq":             o.TokenSeq,
		"migrations":            o.Migrations,
		"fence_resets":          o.FenceResets,
		"acquire_fn":            o.AcquireFunc,
		"renew_fn":              o.RenewFunc,
		"release_fn":            o.ReleaseFunc,
		"get_fn":                o.namespace().Name(suffixGet003),
		"list_fn":               o.namespace().Name(suffixList003),
		"get_lease_fn":          o.GetFunc,
		"list_leases_fn":        o.ListFunc,
		"fence_fn":              o.FenceFunc,
		"check_lease_fn":        o.CheckLeaseFunc,
		"check_lease_strict_fn": o.CheckLeaseStrictFunc,
		"fence_foreign_fn":      o.FenceForeignFunc,
		"fence_reset_fn":        o.FenceResetFunc,
	}, "{{channel_lit}}", pgkit.QuoteLiteral(o.Channel))
}
