package demo

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/snapshot"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// encodeTenure and decodeTenure carry a holder's state to a clone process
// on its command line.
func encodeTenure(t snapshot.Tenure) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func decodeTenure(s string) (snapshot.Tenure, error) {
	var t snapshot.Tenure
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return t, fmt.Errorf("--clone is not base64: %w", err)
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("--clone is not a holder's state: %w", err)
	}
	return t, nil
}

// cloneWork is one restored copy of a holder: it adopts the tenure state
// it was given, exactly as the process the snapshot was taken from held
// it (identity, token, renewal seq), and charges the run once. With strict
// the charge goes through the strict check, which advances the tenure's
// renewal chain in the ledger's transaction; otherwise it goes through the
// token fence with the token the snapshot held in memory.
func cloneWork(ctx context.Context, path string, id int, state string, strict bool, ttl time.Duration, out io.Writer) error {
	t, err := decodeTenure(state)
	if err != nil {
		return err
	}
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		return err
	}
	defer st.Close()
	client, err := tenure.New(st, tenure.Config{Label: fmt.Sprintf("clone-%d", id), TTL: ttl})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- client.Run(runCtx) }()
	defer func() { stop(); <-ran }()

	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	adopted, err := snapshot.Adopt(ctx, client, t)
	if err != nil {
		return err
	}
	l := adopted.(*tenure.Lease)
	say("restored token=%d seq=%d holder=%s", t.Token, t.Seq, t.Holder)
	seq := t.Seq
	if strict {
		seq, err = chargeStrict(ctx, st.DB(), id, l)
	} else {
		err = charge(ctx, st.DB(), id, t.Token, true)
	}
	switch {
	case errors.Is(err, errChainMoved):
		say("chain-refused run=%d token=%d seq=%d", run, t.Token, seq)
	case errors.Is(err, tenure.ErrLost):
		// The tenure ended before the write: its [*tenure.LostError], in
		// err or on the lease, says why.
		reason := "lost"
		var lost *tenure.LostError
		if errors.As(err, &lost) || errors.As(l.Err(), &lost) {
			reason = strings.ReplaceAll(lost.Reason.String(), " ", "-")
			if lost.Reason == tenure.LossSeqMismatch {
				reason = "clone"
			}
		}
		say("stood-down token=%d reason=%s", t.Token, reason)
	case err != nil:
		return err
	default:
		say("charged run=%d token=%d", run, t.Token)
	}
	<-ctx.Done()
	return nil
}

// chargeStrict charges the run under the strict check: in the ledger's
// transaction, the lease row must still be held by this tenure (holder,
// token, not expired by this host's clock, which is the SQLite store's)
// at exactly the renewal seq the tenure presents, and the check advances
// that seq. It is what pgfence's and mysqlfence's strict checks do on
// their servers; the SQLite store keeps the lease row in the same file as
// the ledger, so one transaction covers both. Of two copies of one
// tenure, only the first to commit passes: the second presents a seq the
// chain has left.
//
// It returns the seq it presented.
func chargeStrict(ctx context.Context, db *sql.DB, id int, l *tenure.Lease) (int64, error) {
	w, err := l.BeginChainWrite()
	if err != nil {
		return 0, err
	}
	committed := false
	defer func() {
		if !committed {
			w.Abort()
		}
	}()
	tok := w.Token()
	if tok == 0 {
		return w.Seq(), fmt.Errorf("%w: lease %q: the tenure is no longer trusted", tenure.ErrLost, w.Name())
	}
	ctx = context.WithoutCancel(ctx)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return w.Seq(), err
	}
	defer func() { _ = tx.Rollback() }()
	h := w.Holder()
	res, err := tx.ExecContext(ctx, `UPDATE tenure_leases SET seq = seq + 1
WHERE name = ? AND holder_label = ? AND holder_instance = ? AND token = ? AND seq = ?
  AND released = 0 AND expires_at > ?`,
		w.Name(), h.Label, h.Instance, int64(tok), w.Seq(), time.Now().UnixNano())
	if err != nil {
		return w.Seq(), err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return w.Seq(), errChainMoved
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (run, worker, token) VALUES (?, ?, ?)`, run, id, int64(tok)); err != nil {
		return w.Seq(), err
	}
	if err := tx.Commit(); err != nil {
		return w.Seq(), err
	}
	committed = true
	w.Commit(w.Seq() + 1)
	return w.Seq(), nil
}

// errChainMoved is the strict check's refusal: the lease row is not at
// the seq the write presented (or no longer held by its tenure).
var errChainMoved = fmt.Errorf("%w: the renewal chain moved on: another copy of this tenure wrote or renewed first", store.ErrFenced)
