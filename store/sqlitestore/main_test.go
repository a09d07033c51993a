package sqlitestore_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// Environment of a child process started by the multi-process tests: the
// test binary re-executed with childRole set runs one child body from
// TestMain instead of the tests.
const (
	childRole  = "TENURE_SQLITESTORE_CHILD"  // "open", "openmany", "race" or "handover"
	childPath  = "TENURE_SQLITESTORE_PATH"   // the database file
	childIndex = "TENURE_SQLITESTORE_INDEX"  // 0, 1, ...
	childWant  = "TENURE_SQLITESTORE_GRANTS" // tenures a "race" child must win
)

// Names shared by the parent and the "race" children.
const (
	raceLease    = "race"
	raceResource = "race-resource"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childRole); role != "" {
		if err := runChild(role); err != nil {
			fmt.Fprintf(os.Stderr, "child %s %s: %v\n", role, os.Getenv(childIndex), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testutil.VerifyTestMain(m)
}

// runChild plays its role on the shared file. Once ready to race it prints
// "ready" and waits for the parent to close its standard input, so that all
// children start racing together.
func runChild(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	holder := store.Holder{Label: "child-" + os.Getenv(childIndex), Instance: randomHex()}
	switch role {
	case "open":
		if err := awaitStart(); err != nil {
			return err
		}
		st, err := sqlitestore.Open(ctx, os.Getenv(childPath), sqlitestore.Config{BusyTimeout: 20 * time.Second})
		if err != nil {
			return err
		}
		defer st.Close()
		_, err = st.Acquire(ctx, store.AcquireParams{Name: "open-" + os.Getenv(childIndex), Holder: holder, TTL: time.Minute})
		return err
	case "openmany":
		if err := awaitStart(); err != nil {
			return err
		}
		return openMany(ctx, os.Getenv(childPath), holder)
	case "race":
		want, err := strconv.Atoi(os.Getenv(childWant))
		if err != nil {
			return err
		}
		st, err := sqlitestore.Open(ctx, os.Getenv(childPath), sqlitestore.Config{BusyTimeout: 20 * time.Second})
		if err != nil {
			return err
		}
		defer st.Close()
		return raceChild(ctx, st, holder, want)
	case "handover":
		return handoverChild(ctx, os.Getenv(childPath))
	}
	return fmt.Errorf("unknown role %q", role)
}

// awaitStart tells the parent this child is ready and waits for its signal.
func awaitStart() error {
	if _, err := fmt.Println("ready"); err != nil {
		return fmt.Errorf("report ready: %w", err)
	}
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		return fmt.Errorf("wait for start: %w", err)
	}
	return nil
}

// raceChild wins want tenures of raceLease. Each tenure is recorded in the
// grants table through the fence, marks the lease as taken in the holding
// table (whose primary key refuses a second concurrent holder), unmarks it
// and is released.
func raceChild(ctx context.Context, st *sqlitestore.Store, holder store.Holder, want int) error {
	db := st.DB()
	if _, err := db.ExecContext(ctx, `
CREATE TABLE IF NOT EXISTS grants (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    token  INTEGER NOT NULL,
    holder TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS holding (
    lease  TEXT PRIMARY KEY,
    holder TEXT NOT NULL
);`); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	if err := awaitStart(); err != nil {
		return err
	}
	for won, attempts := 0, 0; won < want; attempts++ {
		if attempts > 200_000 {
			return fmt.Errorf("won only %d of %d tenures in %d attempts", won, want, attempts)
		}
		g, err := st.Acquire(ctx, store.AcquireParams{Name: raceLease, Holder: holder, TTL: time.Minute})
		if errors.Is(err, store.ErrHeld) {
			continue
		}
		if err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
		won++
		if err := inTx(ctx, db, func(tx *sql.Tx) error {
			if err := sqlitestore.Fence(ctx, tx, raceResource, g.Token); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO holding (lease, holder) VALUES (?, ?)`, raceLease, holder.String()); err != nil {
				return fmt.Errorf("two concurrent holders: token %d found the lease taken: %w", g.Token, err)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO grants (token, holder) VALUES (?, ?)`, g.Token, holder.String())
			return err
		}); err != nil {
			return err
		}
		rec, err := st.Get(ctx, raceLease)
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if rec.State != store.StateHeld || rec.Holder != holder || rec.Token != g.Token {
			return fmt.Errorf("two concurrent holders: token %d of %s sees the lease %s by %s with token %d", g.Token, holder, rec.State, rec.Holder, rec.Token)
		}
		if err := inTx(ctx, db, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM holding WHERE lease = ? AND holder = ?`, raceLease, holder.String())
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return fmt.Errorf("two concurrent holders: token %d lost its holding mark (%d rows, %v)", g.Token, n, err)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := st.Release(ctx, store.ReleaseParams{Name: raceLease, Holder: holder, Token: g.Token}); err != nil {
			return fmt.Errorf("release token %d: %w", g.Token, err)
		}
	}
	return nil
}

func inTx(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails.
	return hex.EncodeToString(b)
}

// handoverChild is the other process of BenchmarkHandover: a client of
// its own Store that, for each line read, takes the lease "handover"
// ("take", answering "held" once it holds it) or releases it ("release",
// answering the wall clock time in unix nanoseconds just before the
// release call).
func handoverChild(ctx context.Context, path string) error {
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := tenure.New(st, tenure.Config{Label: "child", TTL: time.Minute})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() { _ = c.Run(runCtx) }) // Run returns nil once runCtx ends.
	var lease *tenure.Lease
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "take":
			if lease, err = c.Campaign(ctx, "handover"); err != nil {
				return fmt.Errorf("campaign: %w", err)
			}
			fmt.Println("held")
		case "release":
			start := time.Now()
			if err := lease.Release(ctx); err != nil {
				return fmt.Errorf("release: %w", err)
			}
			fmt.Println(start.UnixNano())
		default:
			return fmt.Errorf("unknown command %q", in.Text())
		}
	}
	return in.Err()
}
