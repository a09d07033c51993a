package pgadvisory_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/pgadvisory"
)

// Every instance of a service runs the migration at start; the first one
// in does it, in the transaction that holds the lock, and the others wait
// for its commit and then find nothing left to do.
func ExampleXactLock() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := pgadvisory.XactLock(ctx, tx, "billing: schema migrations"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS invoices (id bigint PRIMARY KEY)")
		return err
	})
	fmt.Println(err)
}

// A maintenance task that only one instance should run, skipped by the
// others while it runs: the work happens on the connection that holds the
// lock.
func ExampleTryLock() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	g, err := pgadvisory.TryLock(ctx, conn, "billing: vacuum invoices")
	var held *pgadvisory.HeldError
	switch {
	case errors.As(err, &held):
		fmt.Println("skipped: another instance is at it, backend pid", held.PID)
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	defer func() {
		if err := g.Unlock(ctx); err != nil && !errors.Is(err, store.ErrNotHeld) {
			fmt.Println(err)
		}
	}()
	_, err = conn.Exec(ctx, "VACUUM ANALYZE invoices")
	fmt.Println(err)
}
