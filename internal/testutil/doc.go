// Package testutil holds helpers for tenure's own tests and nothing else:
// production code must never import it.
//
// # Servers
//
// Tests run against real servers. [NeedServer] turns an unreachable server
// into a skip on a developer machine and into a failure when the environment
// variable CI is set, so CI can never pass on zero tests. [PostgresURL] names
// the PostgreSQL server the tests use.
//
// # Isolation
//
// Parallel tests never share rows, tables or keys: [UniqueName] derives a
// short identifier-safe name from the test's name plus random characters,
// [Holder] makes a holder with a fresh random instance id, and [RandomHex]
// makes random names and secrets of any length.
//
// # Notifications
//
// [Notifications] records what a store.Notifier listener reports, so a
// test can wait for a name (or count the empty name that announces each
// subscription) without sleeping.
//
// # Goroutine leaks
//
// Every package whose tests start goroutines calls [VerifyTestMain] from its
// TestMain.
package testutil
