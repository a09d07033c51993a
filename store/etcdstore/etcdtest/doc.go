// Package etcdtest starts real etcd servers for tests, as child processes
// on free loopback ports with a data directory of their own.
//
// It is for tests only: nothing outside _test.go files may import it.
//
// # The binary
//
// [Binary] finds the etcd server in the environment variable
// TENURE_ETCD_BIN, else as etcd on PATH. tools/etcd/ensure.sh builds etcd
// v3.7.3 from a module of its own, caches it and prints its path:
//
//	export TENURE_ETCD_BIN=$(tools/etcd/ensure.sh)
//
// When there is none, tests that need a server skip, or fail when the
// environment variable CI is set ([testutil.NeedServer]).
//
// # One server per test binary
//
// A package's TestMain calls [Main], which starts one server, runs the
// tests, checks for leaked goroutines and stops the server; tests call
// [Shared] for it and [Server.Client] for a client of their own, and keep
// apart by key prefix. Tests that stop or restart a server [Start] one of
// their own.
//
// # Is it ours?
//
// Each server gets a unique member name. [Start] returns only once a
// client on the server's endpoint lists a member of that name, so a test
// never talks to a server someone else started on the same port.
package etcdtest
