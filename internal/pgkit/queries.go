package pgkit

import (
	"fmt"
	"io/fs"
)

// Queries reads the embedded statements a package runs: for each file →
// destination of queries, dir/file of fsys, with render's names
// substituted, is stored in destination. It runs once, at construction.
func Queries(owner string, fsys fs.FS, dir string, render func(sql string) string, queries map[string]*string) error {
	for file, dst := range queries {
		text, err := fs.ReadFile(fsys, dir+"/"+file)
		if err != nil {
			return fmt.Errorf("%s: embedded query %s is missing: %w", owner, file, err)
		}
		*dst = render(string(text))
	}
	return nil
}
