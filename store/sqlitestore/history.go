package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// prunePerEvent is how many events older than the retention one recorded
// event deletes at most: bounded work per acquisition or release, and more
// than the one row it adds, so the history never falls behind for long.
const prunePerEvent = 16

// record writes ev, at now, in the transaction tx of the change it
// records, and deletes up to prunePerEvent events older than the
// retention, oldest first.
func (s *Store) record(ctx context.Context, tx *sql.Tx, now int64, ev store.HistoryEvent) error {
	var prevLabel, prevInstance, prevToken any
	if ev.PreviousToken != 0 {
		prevLabel, prevInstance, prevToken = ev.PreviousHolder.Label, ev.PreviousHolder.Instance, ev.PreviousToken
	}
	var window any
	if ev.Window != "" {
		window = ev.Window
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO tenure_history
    (name, kind, holder_label, holder_instance, token, previous_holder_label, previous_holder_instance, previous_token, at,
     window_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ev.Name, ev.Kind.String(), ev.Holder.Label, ev.Holder.Instance, ev.Token, prevLabel, prevInstance, prevToken, now, window)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM tenure_history WHERE id IN (
    SELECT id FROM tenure_history WHERE at < ? ORDER BY at LIMIT ?)`,
		now-int64(s.cfg.HistoryRetention), prunePerEvent)
	return err
}

// History implements [store.Historian]: one read (no write lock) through
// the indexes on (name, at) and at. Events are kept for
// [Config.HistoryRetention].
func (s *Store) History(ctx context.Context, p store.HistoryParams) ([]store.HistoryEvent, error) {
	if err := s.gate.Check("history"); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: history: %w", err)
	}
	since := int64(0)
	if !p.Since.IsZero() {
		since = p.Since.UnixNano()
	}
	rows, err := s.db.QueryContext(ctx, `SELECT name, kind, holder_label, holder_instance, token,
    coalesce(previous_holder_label, ''), coalesce(previous_holder_instance, ''), coalesce(previous_token, 0), at,
    coalesce(window_key, '')
FROM (
    SELECT * FROM tenure_history
    WHERE (?1 = '' OR name = ?1) AND at >= ?2
    ORDER BY at DESC, id DESC
    LIMIT ?3
)
ORDER BY at, id`, p.Name, since, p.EffectiveLimit())
	if err != nil {
		return nil, s.classify("history", err)
	}
	defer rows.Close()
	events := []store.HistoryEvent{}
	for rows.Next() {
		var (
			ev   store.HistoryEvent
			kind string
			at   int64
		)
		if err := rows.Scan(&ev.Name, &kind, &ev.Holder.Label, &ev.Holder.Instance, &ev.Token,
			&ev.PreviousHolder.Label, &ev.PreviousHolder.Instance, &ev.PreviousToken, &at, &ev.Window); err != nil {
			return nil, s.classify("history", err)
		}
		if ev.Kind, err = store.ParseEventKind(kind); err != nil {
			return nil, fmt.Errorf("sqlitestore: history: %s holds an event this library does not know (%w); upgrade tenure", s.path, err)
		}
		ev.At = time.Unix(0, at).UTC()
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("history", err)
	}
	return events, nil
}
