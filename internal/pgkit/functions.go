package pgkit

import (
	"fmt"
	"strings"
)

func (s Set) createFunctionsTable() string {
	return "CREATE TABLE IF NOT EXISTS " + s.FunctionsTable + ` (
    name       text        PRIMARY KEY,
    revision   integer     NOT NULL,
    sha256     text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)`
}

func (s Set) recordFunction() string {
	return "INSERT INTO " + s.FunctionsTable + ` (name, revision, sha256) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET revision = excluded.revision, sha256 = excluded.sha256, applied_at = clock_timestamp()`
}

// functionsScript is the part of [Set.Script] that installs every function
// and records it.
func (s Set) functionsScript(b *strings.Builder) {
	if len(s.Functions) == 0 {
		return
	}
	b.WriteString("\n" + s.createFunctionsTable() + ";\n")
	for _, f := range s.Functions {
		fmt.Fprintf(b, "\n-- %s function %s, revision %d\n", s.Errors.Owner, f.Name, f.Revision)
		b.WriteString(strings.TrimRight(s.Render(f.SQL), "\n") + "\n")
		fmt.Fprintf(b, "INSERT INTO %s (name, revision, sha256) VALUES (%s, %d, %s)\n"+
			"ON CONFLICT (name) DO UPDATE SET revision = excluded.revision, sha256 = excluded.sha256, applied_at = clock_timestamp();\n",
			s.FunctionsTable, QuoteLiteral(f.Name), f.Revision, QuoteLiteral(f.Hash))
	}
}
