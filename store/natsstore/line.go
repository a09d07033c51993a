package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-dev/tenure/store"
)

// waiter is one follower in a lease's line (the w.<name> key): its holder
// and until when, by the server's clock in Unix microseconds, the line
// keeps it without its asking again.
type waiter struct {
	Label    string `json:"l"`
	Instance string `json:"i"`
	Until    int64  `json:"u"`
}

func (w waiter) holder() store.Holder { return store.Holder{Label: w.Label, Instance: w.Instance} }

// line is a lease's line as read, with the revision of its key (0: none).
type line struct {
	rev     uint64
	waiters []waiter
}

// readLine reads the line of lease name.
func (s *Store) readLine(ctx context.Context, name string) (line, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.subject("w", name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return line{}, nil
	}
	if err != nil {
		return line{}, classify("read the line of lease "+name, err)
	}
	ln := line{rev: m.Sequence}
	if len(m.Data) == 0 {
		return ln, nil
	}
	if err := json.Unmarshal(m.Data, &ln.waiters); err != nil {
		return line{}, fmt.Errorf("natsstore: lease %q: its line key (revision %d) is not a line: %w", name, m.Sequence, err)
	}
	return ln, nil
}

// current returns the followers of ln still in line at the server time
// now, but the holder of the tenure held (who acquired from the line).
func (ln line) current(now time.Time, held store.Holder) []waiter {
	return slices.DeleteFunc(slices.Clone(ln.waiters), func(w waiter) bool {
		return w.Until < now.UnixMicro() || w.holder() == held
	})
}

// head returns the first follower of ln at the server time now other
// than the holder releasing the lease (the zero holder when none).
func (ln line) head(now time.Time, releasing store.Holder) store.Holder {
	if ws := ln.current(now, releasing); len(ws) > 0 {
		return ws[0].holder()
	}
	return store.Holder{}
}

// queue puts p.Holder in the line of a lease l holds (or keeps its place,
// for twice p's TTL after the expiry it is told) and returns its place,
// 1 for the first. The line is written only when it changes beyond
// renewing a place that has more than a TTL left.
func (s *Store) queue(ctx context.Context, p store.AcquireParams, l lease) (int, error) {
	until := l.at.Add(l.ttl + 2*p.TTL).UnixMicro()
	for range casAttempts {
		ln, err := s.readLine(ctx, p.Name)
		if err != nil {
			return 0, err
		}
		ws := ln.current(l.at, l.v.holder())
		i := slices.IndexFunc(ws, func(w waiter) bool { return w.holder() == p.Holder })
		switch {
		case i < 0:
			ws = append(ws, waiter{Label: p.Holder.Label, Instance: p.Holder.Instance, Until: until})
			i = len(ws) - 1
		case ws[i].Until < until-p.TTL.Microseconds():
			ws[i].Until = until
		case len(ws) == len(ln.waiters):
			return i + 1, nil // unchanged
		}
		data, err := json.Marshal(ws)
		if err != nil {
			return 0, fmt.Errorf("natsstore: queue for %q: %w", p.Name, err)
		}
		_, err = s.publish(ctx, s.subject("w", p.Name), data, nil, ln.rev, 0)
		if wrongLastSeq(err) {
			continue
		}
		if err != nil {
			return 0, classify("queue for "+p.Name, err)
		}
		return i + 1, nil
	}
	return 0, fmt.Errorf("natsstore: queue for %q: %w: the line changed under each of %d attempts; try again", p.Name, store.ErrUnavailable, casAttempts)
}
