package storeurl_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
)

// commands are the programs whose backends are values: the tenure command
// and the chaos harness, relative to this package.
var commands = []string{"../..", "../../../tenure-chaos"}

// TestBackendsAreValues keeps each store one value chosen from one table:
// no non-test file of the tenure command or the chaos harness compares a
// store's name (a URL scheme, a backend's Name, a chaos cell's name) with
// == or != or a switch case, and none asserts a URL's backend to its type
// outside the file of that backend. A store's knowledge lives in its value;
// the code around it asks the value.
func TestBackendsAreValues(t *testing.T) {
	t.Parallel()
	files := parseCommands(t)
	types, names := backendTypes(t, files)
	for _, s := range storeurl.Schemes {
		names[s] = true
	}
	for n := range cellNames(t, files) {
		names[n] = true
	}
	require.Contains(t, names, "postgres-run", "the chaos harness's table of cells was not found")
	require.Contains(t, names, "PostgreSQL", "the backends' names were not found")

	var ours map[string]string // the constants of this package
	for _, f := range files {
		if f.file.Name.Name == "storeurl" {
			ours = stringConsts(files, filepath.Dir(f.path))
		}
	}
	for _, f := range files {
		consts := stringConsts(files, filepath.Dir(f.path))
		isName := func(e ast.Expr) (string, bool) {
			switch e := e.(type) {
			case *ast.BasicLit:
				v, err := strconv.Unquote(e.Value)
				return v, err == nil && names[v]
			case *ast.Ident:
				v, ok := consts[e.Name]
				return v, ok && names[v]
			case *ast.SelectorExpr: // a constant of this package, such as a kind
				if pkg, ok := e.X.(*ast.Ident); ok && pkg.Name == "storeurl" {
					v, ok := ours[e.Sel.Name]
					return v, ok && names[v]
				}
			}
			return "", false
		}
		ast.Inspect(f.file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op != token.EQL && n.Op != token.NEQ {
					return true
				}
				for _, side := range []ast.Expr{n.X, n.Y} {
					if v, ok := isName(side); ok {
						t.Errorf("%s: compares with the store name %q: ask the backend's value instead", f.pos(n), v)
					}
				}
			case *ast.SwitchStmt:
				for _, stmt := range n.Body.List {
					for _, e := range stmt.(*ast.CaseClause).List {
						if v, ok := isName(e); ok {
							t.Errorf("%s: switches on the store name %q: ask the backend's value instead", f.pos(e), v)
						}
					}
				}
			case *ast.TypeAssertExpr:
				if n.Type != nil {
					checkBackendType(t, f, types, n.Type)
				}
			case *ast.TypeSwitchStmt:
				for _, stmt := range n.Body.List {
					for _, e := range stmt.(*ast.CaseClause).List {
						checkBackendType(t, f, types, e)
					}
				}
			}
			return true
		})
	}
}

type goFile struct {
	path string
	fset *token.FileSet
	file *ast.File
}

func (f goFile) pos(n ast.Node) token.Position { return f.fset.Position(n.Pos()) }

// parseCommands parses every non-test Go file of the commands.
func parseCommands(t *testing.T) []goFile {
	t.Helper()
	var files []goFile
	for _, root := range commands {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, path, nil, 0)
			files = append(files, goFile{path: path, fset: fset, file: file})
			return err
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, files)
	return files
}

// backendTypes returns the types of this package that are backends (they
// have a Form method), each with the file that declares it, and the names
// their Name methods return.
func backendTypes(t *testing.T, files []goFile) (map[string]string, map[string]bool) {
	t.Helper()
	types, names := map[string]string{}, map[string]bool{}
	for _, f := range files {
		if f.file.Name.Name != "storeurl" {
			continue
		}
		for _, decl := range f.file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || (fn.Name.Name != "Form" && fn.Name.Name != "Name") {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			types[recv.(*ast.Ident).Name] = f.path
			if fn.Name.Name != "Name" {
				continue
			}
			for _, stmt := range fn.Body.List {
				if ret, ok := stmt.(*ast.ReturnStmt); ok && len(ret.Results) == 1 {
					if lit, ok := ret.Results[0].(*ast.BasicLit); ok {
						v, err := strconv.Unquote(lit.Value)
						require.NoError(t, err)
						names[v] = true
					}
				}
			}
		}
	}
	require.Len(t, types, len(names), "every backend has a Name and a Form, and its Name returns a constant")
	return types, names
}

// cellNames returns the names of the chaos harness's cells: the name
// fields of its table, resolved through the package's constants.
func cellNames(t *testing.T, files []goFile) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, f := range files {
		if f.file.Name.Name != "chaos" {
			continue
		}
		consts := stringConsts(files, filepath.Dir(f.path))
		ast.Inspect(f.file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || !slices.ContainsFunc(vs.Names, func(id *ast.Ident) bool { return id.Name == "cellBackends" }) {
				return true
			}
			ast.Inspect(vs, func(n ast.Node) bool {
				kv, ok := n.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				if key, ok := kv.Key.(*ast.Ident); !ok || key.Name != "name" {
					return true
				}
				switch v := kv.Value.(type) {
				case *ast.BasicLit:
					s, err := strconv.Unquote(v.Value)
					require.NoError(t, err)
					names[s] = true
				case *ast.Ident:
					names[consts[v.Name]] = true
				}
				return true
			})
			return false
		})
	}
	return names
}

// stringConsts returns the string constants declared in the package of
// dir, by name.
func stringConsts(files []goFile, dir string) map[string]string {
	consts := map[string]string{}
	for _, f := range files {
		if filepath.Dir(f.path) != dir {
			continue
		}
		for _, decl := range f.file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[id.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	return consts
}

// checkBackendType reports a type assertion to a backend's type outside
// the file that declares it.
func checkBackendType(t *testing.T, f goFile, types map[string]string, e ast.Expr) {
	t.Helper()
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	name := ""
	switch e := e.(type) {
	case *ast.Ident:
		if f.file.Name.Name == "storeurl" {
			name = e.Name
		}
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); ok && pkg.Name == "storeurl" {
			name = e.Sel.Name
		}
	}
	if decl, ok := types[name]; ok && decl != f.path {
		t.Errorf("%s: asserts a store URL's backend to %s outside %s: ask the backend's value instead", f.pos(e), name, decl)
	}
}
