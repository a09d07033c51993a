package tenure_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRootImportsStandardLibraryOnly keeps the promise that importing
// tenure brings no dependencies: the root package and the engine it embeds
// import only the standard library and each other.
func TestRootImportsStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "internal/engine"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			require.NoError(t, err)
			for _, imp := range parsed.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				first, _, _ := strings.Cut(path, "/")
				if path == "github.com/tenure-dev/tenure/internal/engine" {
					continue
				}
				require.NotContains(t, first, ".", "%s imports %s: the root package must stay standard-library only", f, path)
			}
		}
	}
}
