package tenure_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRootImportsStandardLibraryOnly keeps the promise that importing
// tenure brings no dependencies: the root package, the store contract and
// the internal packages the root is built from import only the standard
// library and each other.
func TestRootImportsStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	const module = "github.com/tenure-dev/tenure"
	closed := []string{".", "store", "internal/engine", "internal/drive", "internal/identity", "internal/snapshot"}
	for _, dir := range closed {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files, dir)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			require.NoError(t, err)
			for _, imp := range parsed.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				if rel, ok := strings.CutPrefix(path, module+"/"); ok && slices.Contains(closed, rel) {
					continue
				}
				first, _, _ := strings.Cut(path, "/")
				require.NotContains(t, first, ".", "%s imports %s: the root package and what it is built from must stay standard-library only", f, path)
			}
		}
	}
}
