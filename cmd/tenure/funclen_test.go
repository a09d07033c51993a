package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxFuncLines is the longest a function of the CLI may be, from its
// declaration to its closing brace: past it, a reader cannot hold what it
// decides, and tenure run's decisions in particular belong in the pure
// policy of internal/supervise, where table tests reach them.
const maxFuncLines = 100

// TestFunctionsFitOnAScreen fails on any function under internal/, test
// files aside, longer than maxFuncLines.
func TestFunctionsFitOnAScreen(t *testing.T) {
	t.Parallel()
	var long []string
	err := filepath.WalkDir("internal", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				long = append(long, fmt.Sprintf("%s: %s is %d lines", path, fn.Name.Name, n))
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, long, "functions over %d lines: split them", maxFuncLines)
}
