package demo

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

const (
	leaseName = "nightly-billing"
	run       = 1 // tonight's billing run
	// providerCall is how long the payment provider takes: the window in
	// which the demo freezes the leader.
	providerCall = 300 * time.Millisecond
)

// Worker is one contending process: `tenure demo-worker --db PATH --id N
// [--fenced]`, or with --clone STATE [--strict] one restored copy of a
// holder. It prints one line per event on stdout, which the orchestrator
// reads.
func Worker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", "", "SQLite file of the scene")
	id := fs.Int("id", 0, "worker number")
	fenced := fs.Bool("fenced", true, "charge through the fence")
	ttl := fs.Duration("ttl", 2*time.Second, "lease TTL")
	clone := fs.String("clone", "", "run as a restored copy of this holder state (base64 JSON)")
	strict := fs.Bool("strict", true, "with --clone, charge through the strict check")
	if err := fs.Parse(args); err != nil {
		return 64
	}
	if *db == "" || *id <= 0 {
		fmt.Fprintln(stderr, "tenure: demo-worker: --db and --id are required")
		return 64
	}
	var err error
	if *clone != "" {
		err = cloneWork(ctx, *db, *id, *clone, *strict, *ttl, stdout)
	} else {
		err = work(ctx, *db, *id, *fenced, *ttl, stdout)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "tenure: demo-worker %d: %v\n", *id, err)
		return 1
	}
	return 0
}

func work(ctx context.Context, path string, id int, fenced bool, ttl time.Duration, out io.Writer) error {
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		return err
	}
	defer st.Close()
	client, err := tenure.New(st, tenure.Config{Label: fmt.Sprintf("worker-%d", id), TTL: ttl})
	if err != nil {
		return err
	}
	ranCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- client.Run(ranCtx) }()
	defer func() { stop(); <-ran }()

	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	for ctx.Err() == nil {
		err := client.Do(ctx, leaseName, func(ctx context.Context, l *tenure.Lease) error {
			say("acquired token=%d", l.Token())
			if n, err := charges(ctx, st.DB()); err != nil || n > 0 {
				if err == nil {
					say("idle run=%d already-charged", run)
					<-ctx.Done()
				}
				return err
			}
			tok := l.Token() // read before the slow call: the window a pause can hit
			say("charging run=%d token=%d", run, tok)
			time.Sleep(providerCall) // the payment provider
			err := charge(ctx, st.DB(), id, tok, fenced)
			var fe *store.FencedError
			switch {
			case errors.As(err, &fe):
				say("fenced run=%d token=%d recorded=%d", run, tok, fe.Recorded)
				return err
			case err != nil:
				return err
			}
			say("charged run=%d token=%d", run, tok)
			<-ctx.Done()
			return nil
		})
		var lost *tenure.LostError
		if errors.As(err, &lost) {
			say("lost token=%d reason=%q", lost.Token, lost.Reason.String())
		}
		if errors.Is(err, store.ErrFenced) {
			return nil // superseded: this worker's night is over
		}
	}
	return nil
}

// charge records tonight's charge in the ledger, through the fence when
// fenced: the fence and the write commit together or not at all. Like most
// code halfway through a write, it does not stop for a cancelled context:
// the resumed leader finishes what it started.
func charge(ctx context.Context, db *sql.DB, id int, tok store.Token, fenced bool) error {
	ctx = context.WithoutCancel(ctx)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if fenced {
		if err := sqlitestore.Fence(ctx, tx, "ledger", tok); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (run, worker, token) VALUES (?, ?, ?)`, run, id, int64(tok)); err != nil {
		return err
	}
	return tx.Commit()
}

func charges(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM ledger WHERE run = ?`, run).Scan(&n)
	return n, err
}

func createLedger(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS ledger (
		run    INTEGER NOT NULL,
		worker INTEGER NOT NULL,
		token  INTEGER NOT NULL
	)`)
	return err
}
