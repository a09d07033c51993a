package natsstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-dev/tenure/store"
)

// relistenDelay is how long Listen waits before it watches again after a
// watch could not be made or ended.
const relistenDelay = time.Second

// Listen implements [store.Notifier]: it watches the held keys and
// reports each deletion (a release, or the marker the server leaves when
// a TTL runs out) and each new tenure (a takeover). After a reconnection,
// or when the watch ends, it watches again and reports the empty name.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	if err := s.begin(); err != nil {
		return err
	}
	for {
		if s.watch(ctx, notify) {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		case <-time.After(relistenDelay):
		}
	}
}

// watch runs one watch until ctx is done, the watch ends or the
// connection reconnects, and reports whether to watch again at once (after
// a reconnection). The ordered consumer behind the watch would resume by
// itself after a reconnection, but only once it has missed its heartbeats,
// seconds later; a new watch (announced with the empty name) is quicker.
func (s *Store) watch(ctx context.Context, notify func(store.Notice)) bool {
	nc := s.js.Conn()
	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	w, err := s.kv.Watch(ctx, "h.>", jetstream.UpdatesOnly())
	if err != nil {
		return false
	}
	defer func() { _ = w.Stop() }()
	notify(store.Notice{})
	for {
		select {
		case <-ctx.Done():
			return false
		case <-s.done:
			return false
		case <-reconnected:
			return true
		case e, ok := <-w.Updates():
			if !ok {
				return false
			}
			if e == nil {
				continue
			}
			if n, ok := announced(e); ok {
				notify(n)
			}
		}
	}
}

// announced returns the notice of a held key's entry that ends or begins
// a tenure; renewals announce nothing. A release's marker is a
// [store.NoticeReleased] naming the head of the line it found; a new
// tenure (a value of seq 1) a [store.NoticeAcquired] with its holder and
// TTL; the marker of a TTL run out, and entries of earlier versions
// without what these need, a [store.NoticeChanged].
func announced(e jetstream.KeyValueEntry) (store.Notice, bool) {
	enc, ok := strings.CutPrefix(e.Key(), "h.")
	if !ok {
		return store.Notice{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return store.Notice{}, false
	}
	n := store.Notice{Name: string(raw)}
	var v value
	parsed := len(e.Value()) > 0 && json.Unmarshal(e.Value(), &v) == nil
	switch e.Operation() {
	case jetstream.KeyValuePut:
		if !parsed || v.Seq != 1 {
			return store.Notice{}, false
		}
		if v.TTL > 0 {
			n.Kind, n.Holder, n.Remaining = store.NoticeAcquired, v.holder(), time.Duration(v.TTL)*time.Second
		}
	case jetstream.KeyValueDelete:
		if parsed {
			n.Kind, n.Next = store.NoticeReleased, store.Holder{Label: v.NextLabel, Instance: v.NextInstance}
		}
	}
	return n, true
}
