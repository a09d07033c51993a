// Package storesdoc keeps docs/STORES.md true. Its test computes, for
// every backend under store/, the optional interfaces of package store its
// Store type implements (by type assertion, not from its doc comments) and
// the [storetest.Capabilities] its conformance harness declares, and fails
// when the tables in docs/STORES.md say otherwise, or when a backend has
// no row; `go test ./cmd/tenure/internal/storesdoc -update` rewrites them.
//
// It lives in the tenure command's tree because it imports every backend
// and every harness: the root module, with the store contract and the
// suite, needs the standard library only, and each backend is a module of
// its own. The package has no code besides its test.
//
// [storetest.Capabilities]: https://pkg.go.dev/github.com/tenure-dev/tenure/store/storetest#Capabilities
package storesdoc
