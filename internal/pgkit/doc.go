// Package pgkit is the PostgreSQL plumbing shared by the packages that talk
// to PostgreSQL (store/pgstore, registry, fence/pgfence, pgadvisory), so
// each of them keeps only what is its own:
//
//   - [Namespace]: a schema and a table prefix, with their defaults and
//     validation, and the quoting of the objects named from them;
//   - [Interpreter]: the one classification of pgx errors into tenure's
//     (missing objects → store.ErrNotMigrated, "not now" SQLSTATEs,
//     transport errors and ended contexts → store.ErrUnavailable);
//   - [Set]: versioned, embedded migrations and functions (one file each,
//     installed when missing or changed, see [storekit.Function]) applied to one
//     schema under that schema's advisory lock, or printed as a script for
//     a DBA; [Set.Status] says what a schema records of them.
package pgkit
