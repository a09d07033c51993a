package pgkit_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/pgkit"
	"github.com/tenure-dev/tenure/store"
)

func TestNewNamespace(t *testing.T) {
	t.Parallel()
	const longestSuffix = 10 // prefixes up to 53 bytes
	tests := []struct {
		name           string
		schema, prefix string
		want           pgkit.Namespace
		wantErr        string // substring; empty means valid
	}{
		{name: "ZeroIsDefaults", want: pgkit.Namespace{Schema: "public", Prefix: "tenure_"}},
		{name: "OddNames", schema: `We "quote" it`, prefix: "x'y ", want: pgkit.Namespace{Schema: `We "quote" it`, Prefix: "x'y "}},
		{name: "LongestSchema", schema: strings.Repeat("s", 63), want: pgkit.Namespace{Schema: strings.Repeat("s", 63), Prefix: "tenure_"}},
		{name: "LongSchema", schema: strings.Repeat("s", 64), wantErr: "Schema \"" + strings.Repeat("s", 64) + "\" is 64 bytes long; the maximum is 63"},
		{name: "LongestPrefix", prefix: strings.Repeat("p", 53), want: pgkit.Namespace{Schema: "public", Prefix: strings.Repeat("p", 53)}},
		{name: "LongPrefix", prefix: strings.Repeat("p", 54), wantErr: "TablePrefix"},
		{name: "DollarSchema", schema: "a$b", wantErr: "contains '$'"},
		{name: "ControlPrefix", prefix: "a\nb", wantErr: "control character U+000A"},
		{name: "C1Control", prefix: "a\u0085b", wantErr: "control character U+0085"},
		{name: "Delete", schema: "a\x7fb", wantErr: "control character U+007F"},
		{name: "BadUTF8", schema: "a\xffb", wantErr: "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns, err := pgkit.NewNamespace("owner", tt.schema, tt.prefix, longestSuffix)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, ns)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tt.wantErr)
			require.True(t, strings.HasPrefix(err.Error(), "owner: "), err.Error())
		})
	}
}

func TestQuoting(t *testing.T) {
	t.Parallel()
	ns := pgkit.Namespace{Schema: `my "schema"`, Prefix: "p."}
	for name, tc := range map[string]struct{ got, want string }{
		"Name":          {ns.Name("leases"), "p.leases"},
		"QuotedSchema":  {ns.QuotedSchema(), `"my ""schema"""`},
		"Ident":         {ns.Ident(ns.Name("leases")), `"my ""schema"""."p.leases"`},
		"QuoteIdent":    {pgkit.QuoteIdent(`a"b`), `"a""b"`},
		"Literal":       {pgkit.QuoteLiteral("it's"), `'it''s'`},
		"LiteralBSlash": {pgkit.QuoteLiteral(`a\b'c`), `E'a\\b''c'`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.got)
		})
	}
}

func TestRenderer(t *testing.T) {
	t.Parallel()
	ns := pgkit.Namespace{Schema: "s", Prefix: "p_"}
	render := ns.Renderer(map[string]string{
		"leases":         ns.Name("leases"),
		"check_lease_fn": ns.Name("check_lease"),
	}, "{{cols}}", "a, b", "{{idx}}", pgkit.QuoteIdent("p_idx"))
	require.Equal(t,
		`SELECT a, b FROM "s"."p_leases" WHERE "s"."p_check_lease"(1) IN SCHEMA "s" USING "p_idx" {{other}} '"s"."p_leases"'::regclass`,
		render("SELECT {{cols}} FROM {{leases}} WHERE {{check_lease_fn}}(1) IN SCHEMA {{schema}} USING {{idx}} {{other}} {{leases_lit}}::regclass"))
}
