package pgkit

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
)

// Defaults shared by every package that keeps objects in PostgreSQL, so one
// `tenure migrate` sets them all up side by side.
const (
	DefaultSchema      = "public"
	DefaultTablePrefix = "tenure_"
)

// MaxIdentLen is the longest identifier PostgreSQL keeps (NAMEDATALEN-1);
// longer ones are silently truncated, which would make two configurations
// share objects.
const MaxIdentLen = 63

// Namespace is where a package keeps its objects: a schema and a prefix put
// in front of every object's name. Build it with [NewNamespace].
type Namespace struct {
	Schema string
	Prefix string
}

// NewNamespace fills in the defaults ([DefaultSchema], [DefaultTablePrefix])
// and validates both names: the schema is an identifier of at most
// [MaxIdentLen] bytes, the prefix at most MaxIdentLen-longestSuffix bytes
// so that prefix+suffix still fits. owner prefixes the error ("pgstore");
// every error matches [store.ErrInvalid] and names the Config field
// (Schema, TablePrefix).
func NewNamespace(owner, schema, prefix string, longestSuffix int) (Namespace, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	if prefix == "" {
		prefix = DefaultTablePrefix
	}
	if err := ValidateIdent(owner, "Schema", schema, MaxIdentLen); err != nil {
		return Namespace{}, err
	}
	if err := ValidateIdent(owner, "TablePrefix", prefix, MaxIdentLen-longestSuffix); err != nil {
		return Namespace{}, err
	}
	return Namespace{Schema: schema, Prefix: prefix}, nil
}

// ValidateIdent checks a name that is put into SQL as a quoted identifier
// (or part of one): at most maxLen bytes, valid UTF-8, no control
// characters, and no '$', which would end the dollar quoting of the
// migration scripts. field names it in the message.
func ValidateIdent(owner, field, s string, maxLen int) error {
	switch {
	case len(s) > maxLen:
		return fmt.Errorf("%s: %w: %s %q is %d bytes long; the maximum is %d (PostgreSQL truncates longer names)",
			owner, store.ErrInvalid, field, s, len(s), maxLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s: %w: %s %q is not valid UTF-8", owner, store.ErrInvalid, field, s)
	case strings.Contains(s, "$"):
		return fmt.Errorf("%s: %w: %s %q contains '$', which names may not contain; choose another name",
			owner, store.ErrInvalid, field, s)
	}
	for _, r := range s {
		if IsControl(r) {
			return fmt.Errorf("%s: %w: %s %q contains the control character %U; choose another name",
				owner, store.ErrInvalid, field, s, r)
		}
	}
	return nil
}

// IsControl reports the C0 and C1 control characters and DEL.
func IsControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// Name returns the unquoted name of the object suffix in ns: the prefix
// followed by suffix.
func (ns Namespace) Name(suffix string) string { return ns.Prefix + suffix }

// QuotedSchema returns the schema quoted as an identifier.
func (ns Namespace) QuotedSchema() string { return pgx.Identifier{ns.Schema}.Sanitize() }

// Ident returns name (a whole object name, prefix included) quoted and
// qualified with ns's schema: "schema"."name".
func (ns Namespace) Ident(name string) string { return pgx.Identifier{ns.Schema, name}.Sanitize() }

// Renderer returns the function that puts quoted names into embedded SQL,
// built once at construction: {{schema}} becomes the quoted schema; for
// each placeholder → object name of objects, {{placeholder}} becomes the
// object quoted and schema-qualified, and {{placeholder_lit}} that quoted
// name as a string literal (for ::regclass and the like); then verbatim's
// pairs (placeholder, text, placeholder, text, …) are substituted as they
// are.
func (ns Namespace) Renderer(objects map[string]string, verbatim ...string) func(sql string) string {
	pairs := make([]string, 0, 2+4*len(objects)+len(verbatim))
	pairs = append(pairs, "{{schema}}", ns.QuotedSchema())
	for placeholder, name := range objects {
		pairs = append(pairs, "{{"+placeholder+"}}", ns.Ident(name), "{{"+placeholder+"_lit}}", QuoteLiteral(ns.Ident(name)))
	}
	pairs = append(pairs, verbatim...)
	return strings.NewReplacer(pairs...).Replace
}

// QuoteIdent quotes s as one identifier.
func QuoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// QuoteLiteral quotes s as an SQL string literal that reads the same
// whatever standard_conforming_strings says.
func QuoteLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		q = "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}

// GrantSQL returns the statements that grant role USAGE on ns's schema and
// then each of privileges ("SELECT ON TABLE …"), one GRANT a line. owner
// prefixes the error of an empty role, which matches [store.ErrInvalid].
func (ns Namespace) GrantSQL(owner, role string, privileges ...string) (string, error) {
	if role == "" {
		return "", fmt.Errorf("%s: grant: %w: role is empty", owner, store.ErrInvalid)
	}
	r := QuoteIdent(role)
	var b strings.Builder
	fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA %s TO %s;\n", ns.QuotedSchema(), r)
	for _, p := range privileges {
		fmt.Fprintf(&b, "GRANT %s TO %s;\n", p, r)
	}
	return b.String(), nil
}
