package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// prunePerWait is how many forgotten followers of any lease one follower
// put in line deletes at most: the line of a lease nobody asks for again
// is cleared a few rows at a time, and forgotten followers are deleted
// faster than new ones get in line, with bounded work per call.
const prunePerWait = 16

// kept reports whether the released lease r is kept at now for a
// follower (see [store.Handoff]).
func (r row) kept(now int64) bool {
	return r.released && r.lineChanged == r.changed && r.keptFor != (store.Holder{}) && r.keptUntil > now
}

// refuse returns the [*store.HeldError] that refuses p at now on the
// lease cur, or nil when p may take it: when it is not held and not kept
// for another follower. A refused p that asks to wait is put in line, or
// keeps its place there, and learns its position.
func refuse(ctx context.Context, tx *sql.Tx, now int64, p store.AcquireParams, cur row) error {
	var he *store.HeldError
	switch {
	case cur.held(now):
		he = &store.HeldError{
			Name:      p.Name,
			Holder:    cur.holder,
			Token:     cur.token,
			Seq:       cur.seq,
			Remaining: time.Duration(cur.expiresAt - now),
			Payload:   cur.payload,
		}
	case cur.kept(now) && cur.keptFor != p.Holder:
		he = &store.HeldError{Name: p.Name, Token: cur.token, Next: cur.keptFor, Remaining: time.Duration(cur.keptUntil - now)}
	default:
		return nil
	}
	if p.Wait {
		pos, err := waitInLine(ctx, tx, now, p, he.Remaining)
		if err != nil {
			return err
		}
		he.Position = pos
	}
	return he
}

// waitInLine puts p.Holder at the end of the line of p.Name, or keeps its
// place there, until twice p.TTL after the expiry it was told (remaining
// from now), and returns its position, 1 for the head.
func waitInLine(ctx context.Context, tx *sql.Tx, now int64, p store.AcquireParams, remaining time.Duration) (int, error) {
	// Followers of this lease that were forgotten lose their places first,
	// so that one of them asking again goes to the end of the line.
	if _, err := tx.ExecContext(ctx, `DELETE FROM tenure_waiters WHERE name = ? AND until <= ?`, p.Name, now); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM tenure_waiters WHERE id IN (
    SELECT id FROM tenure_waiters WHERE until <= ? ORDER BY until LIMIT ?)`, now, prunePerWait); err != nil {
		return 0, err
	}
	until := addSaturating(addSaturating(addSaturating(now, remaining), p.TTL), p.TTL)
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO tenure_waiters (name, holder_label, holder_instance, until)
VALUES (?, ?, ?, ?)
ON CONFLICT (name, holder_label, holder_instance) DO UPDATE SET until = excluded.until
RETURNING id`, p.Name, p.Holder.Label, p.Holder.Instance, until).Scan(&id)
	if err != nil {
		return 0, err
	}
	var pos int
	err = tx.QueryRowContext(ctx, `SELECT count(*) FROM tenure_waiters WHERE name = ? AND id <= ?`, p.Name, id).Scan(&pos)
	return pos, err
}

// addSaturating returns now + d, or the greatest time that can be stored
// when that is later.
func addSaturating(now int64, d time.Duration) int64 {
	if int64(d) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(d)
}

// leaveLine takes h out of the line of the lease name: it has acquired it.
func leaveLine(ctx context.Context, tx *sql.Tx, name string, h store.Holder) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM tenure_waiters WHERE name = ? AND holder_label = ? AND holder_instance = ?`,
		name, h.Label, h.Instance)
	return err
}

// head returns the follower at the head of the line of the lease name at
// now, or the zero holder when nobody waits.
func head(ctx context.Context, tx *sql.Tx, now int64, name string) (store.Holder, error) {
	var h store.Holder
	err := tx.QueryRowContext(ctx, `SELECT holder_label, holder_instance FROM tenure_waiters
WHERE name = ? AND until > ? ORDER BY id LIMIT 1`, name, now).Scan(&h.Label, &h.Instance)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Holder{}, nil
	}
	return h, err
}

// notice is what the change stamped on r announces for the lease name.
func (r row) notice(name string) store.Notice {
	switch {
	case r.lineChanged != r.changed:
		// Changed by a library older than migration 005, which records
		// neither the TTL nor the line.
		return store.Notice{Name: name, Kind: store.NoticeChanged}
	case r.released:
		return store.Notice{Name: name, Kind: store.NoticeReleased, Next: r.keptFor}
	}
	return store.Notice{Name: name, Kind: store.NoticeAcquired, Holder: r.holder, Remaining: time.Duration(r.ttl)}
}
