package storesdoc_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testserver/kubeserver"
	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/alwaysleader"
	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/etcdstore"
	"github.com/tenure-dev/tenure/store/k8sstore"
	"github.com/tenure-dev/tenure/store/memstore"
	"github.com/tenure-dev/tenure/store/memstore/memstoretest"
	"github.com/tenure-dev/tenure/store/mysqlstore"
	"github.com/tenure-dev/tenure/store/natsstore"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/redisstore"
	"github.com/tenure-dev/tenure/store/sqlitestore"
	"github.com/tenure-dev/tenure/store/storetest"
)

var update = flag.Bool("update", false, "rewrite the generated tables of docs/STORES.md from the code")

// doc is the file the tables live in, from this package's directory.
const doc = "../../../../docs/STORES.md"

// The generated part of doc lies between these lines.
const (
	begin = "<!-- Generated from the code by cmd/tenure/internal/storesdoc; `go test ./cmd/tenure/internal/storesdoc -update` rewrites it. -->"
	end   = "<!-- End of the generated tables. -->"
)

// backends are the packages under store/ that implement [store.Store],
// each with a value of its Store type and its conformance harness (nil
// for a store that does not run the suite, with why in skip).
var backends = []struct {
	pkg     string
	typ     store.Store
	harness storetest.Harness
	skip    string
}{
	{pkg: "pgstore", typ: (*pgstore.Store)(nil), harness: pgserver.PostgresHarness{}},
	{pkg: "mysqlstore", typ: (*mysqlstore.Store)(nil), harness: mysqlserver.MySQLHarness{}},
	{pkg: "sqlitestore", typ: (*sqlitestore.Store)(nil), harness: sqliteserver.SQLiteHarness{}},
	{pkg: "redisstore", typ: (*redisstore.Store)(nil), harness: redisserver.RedisHarness{}},
	{pkg: "etcdstore", typ: (*etcdstore.Store)(nil), harness: etcdserver.EtcdHarness{}},
	{pkg: "consulstore", typ: (*consulstore.Store)(nil), harness: consulserver.ConsulHarness{}},
	{pkg: "natsstore", typ: (*natsstore.Store)(nil), harness: natsserver.NatsHarness{}},
	{pkg: "k8sstore", typ: (*k8sstore.Store)(nil), harness: kubeserver.Harness{}},
	{pkg: "alwaysleader", typ: (*alwaysleader.Store)(nil), skip: "does not run the suite: every caller leads, with one constant token"},
	{pkg: "memstore", typ: (*memstore.Store)(nil), harness: memstoretest.Harness{}},
}

// optional are the optional interfaces of package store, in the order of
// the table's columns.
var optional = []reflect.Type{
	reflect.TypeFor[store.Notifier](),
	reflect.TypeFor[store.Subscriber](),
	reflect.TypeFor[store.Lister](),
	reflect.TypeFor[store.BatchAcquirer](),
	reflect.TypeFor[store.BatchReleaser](),
	reflect.TypeFor[store.TTLFloor](),
	reflect.TypeFor[store.TTLUnit](),
	reflect.TypeFor[store.Historian](),
	reflect.TypeFor[store.ForceReleaser](),
	reflect.TypeFor[store.Windower](),
}

// TestStoresTable compares the tables of docs/STORES.md with the code.
func TestStoresTable(t *testing.T) {
	t.Parallel()
	want := tables()
	raw, err := os.ReadFile(doc)
	require.NoError(t, err)
	text := string(raw)
	before, rest, ok := strings.Cut(text, begin+"\n")
	require.True(t, ok, "%s has no line %q", doc, begin)
	got, after, ok := strings.Cut(rest, end+"\n")
	require.True(t, ok, "%s has no line %q after the generated tables", doc, end)
	if *update {
		require.NoError(t, os.WriteFile(doc, []byte(before+begin+"\n"+want+end+"\n"+after), 0o644))
		return
	}
	require.Equal(t, want, got, "%s disagrees with the code: run go test ./cmd/tenure/internal/storesdoc -update and commit what it writes", doc)
}

// TestEveryBackendHasARow fails when a package under store/ has no row in
// backends.
func TestEveryBackendHasARow(t *testing.T) {
	t.Parallel()
	dirs, err := os.ReadDir("../../../../store")
	require.NoError(t, err)
	var pkgs, rows []string
	for _, d := range dirs {
		if d.IsDir() && d.Name() != "storetest" {
			pkgs = append(pkgs, d.Name())
		}
	}
	for _, b := range backends {
		rows = append(rows, b.pkg)
		require.DirExists(t, filepath.Join("../../../../store", b.pkg))
	}
	slices.Sort(rows)
	require.Equal(t, pkgs, rows, "every backend under store/ needs a row in backends, so that docs/STORES.md covers it")
}

// tables renders the generated part of doc.
func tables() string {
	var b strings.Builder
	b.WriteString("### Optional interfaces\n\n| package |")
	for _, i := range optional {
		fmt.Fprintf(&b, " [%s] |", i.Name())
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(optional)) + "\n")
	for _, s := range backends {
		fmt.Fprintf(&b, "| %s |", s.pkg)
		for _, i := range optional {
			fmt.Fprintf(&b, " %s |", yes(reflect.TypeOf(s.typ).Implements(i)))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, i := range optional {
		fmt.Fprintf(&b, "[%s]: https://pkg.go.dev/github.com/tenure-dev/tenure/store#%s\n", i.Name(), i.Name())
	}

	b.WriteString("\n### Conformance capabilities\n\n")
	b.WriteString("| package | Notify | Line | Handoff | ExpiryLag | MinTTL | Cut | Restart |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range backends {
		if s.harness == nil {
			fmt.Fprintf(&b, "| %s | %s |\n", s.pkg, s.skip)
			continue
		}
		c := s.harness.Capabilities()
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", s.pkg,
			yes(c.Notify), yes(c.Line), yes(c.Line && !c.NoHandoff), c.ExpiryLag, minTTL(c.MinTTL),
			fault(c.Faults.NoCut, c.Faults.NewStore != nil), fault(c.Faults.NoRestart, c.Faults.NewStore != nil))
	}
	return b.String()
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func minTTL(d interface{ String() string }) string {
	if s := d.String(); s != "0s" {
		return s
	}
	return "the store's"
}

// fault describes a fault the harness injects, or why it declines it.
func fault(declined string, injects bool) string {
	switch {
	case declined != "":
		return "declined: " + declined
	case injects:
		return "yes"
	}
	return "neither injected nor declined"
}
