package storekit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
)

// Function is one file NAME.sql of an SQL store's functions (or
// procedures): everything that defines one of them (for PostgreSQL the
// CREATE OR REPLACE FUNCTION, its REVOKE, the triggers that call it; for
// MySQL the DROP and CREATE PROCEDURE), in statements that can run again
// without harm.
// Its first line is "-- revision N": Migrate installs the file when
// the schema records a lower revision of it, or the same revision with
// other text (another build of the same revision, or an edited file), and
// leaves it alone when the schema records a higher one (a newer library
// installed it).
type Function struct {
	Name     string
	Revision int
	SQL      string // with the owner's {{placeholders}}
	// Hash is the hex SHA-256 of the file as embedded, before rendering:
	// one value for every schema and prefix.
	Hash string
}

var (
	functionFile = regexp.MustCompile(`^([a-z0-9_]+)\.sql$`)
	revisionLine = regexp.MustCompile(`^-- revision ([1-9][0-9]*)\n`)
)

// LoadFunctions reads the functions in dir of fsys, in name order.
func LoadFunctions(owner string, fsys fs.FS, dir string) ([]Function, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: embedded functions are missing: %w", owner, err)
	}
	fns := make([]Function, 0, len(entries))
	for _, e := range entries {
		m := functionFile.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("%s: embedded function file %q is not named name.sql", owner, e.Name())
		}
		text, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("%s: embedded function file %q: %w", owner, e.Name(), err)
		}
		r := revisionLine.FindSubmatch(text)
		if r == nil {
			return nil, fmt.Errorf("%s: embedded function file %q does not start with a line \"-- revision N\"", owner, e.Name())
		}
		revision, err := strconv.Atoi(string(r[1]))
		if err != nil {
			return nil, fmt.Errorf("%s: embedded function file %q: %w", owner, e.Name(), err)
		}
		sum := sha256.Sum256(text)
		fns = append(fns, Function{Name: m[1], Revision: revision, SQL: string(text), Hash: hex.EncodeToString(sum[:])})
	}
	return fns, nil
}

// Recorded is what a schema records of one function.
type Recorded struct {
	Revision int
	Hash     string
}

// FunctionState says what Migrate does with f given what the schema
// records of it: "" when it is current, "newer" when a newer library
// installed a higher revision (left alone), and otherwise why it is
// installed: "missing", "older" or "changed".
func FunctionState(f Function, rec Recorded, ok bool) string {
	switch {
	case !ok:
		return "missing"
	case rec.Revision > f.Revision:
		return "newer"
	case rec.Revision < f.Revision:
		return "older"
	case rec.Hash != f.Hash:
		return "changed"
	}
	return ""
}
