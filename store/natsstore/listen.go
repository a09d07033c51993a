package natsstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// relistenDelay is how long Listen waits before it watches again after a
// watch could not be made or ended.
const relistenDelay = time.Second

// Listen implements [store.Notifier]: it watches the held keys and
// reports each deletion (a release, or the marker the server leaves when
// a TTL runs out) and each new tenure (a takeover). The watch is an
// ordered consumer that resumes after a reconnection from the last
// message it delivered; when it ends anyway, Listen watches again and
// reports the empty name.
func (s *Store) Listen(ctx context.Context, notify func(name string)) error {
	if err := s.begin(); err != nil {
		return err
	}
	for {
		s.watch(ctx, notify)
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		case <-time.After(relistenDelay):
		}
	}
}

// watch runs one watch until ctx is done or the watch ends.
func (s *Store) watch(ctx context.Context, notify func(name string)) {
	w, err := s.kv.Watch(ctx, "h.>", jetstream.UpdatesOnly())
	if err != nil {
		return
	}
	defer func() { _ = w.Stop() }()
	notify("")
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			if name, ok := announced(e); ok {
				notify(name)
			}
		}
	}
}

// announced returns the lease name of a held key's entry that ends or
// begins a tenure; renewals announce nothing.
func announced(e jetstream.KeyValueEntry) (string, bool) {
	enc, ok := strings.CutPrefix(e.Key(), "h.")
	if !ok {
		return "", false
	}
	name, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	if e.Operation() == jetstream.KeyValuePut {
		var v value
		if json.Unmarshal(e.Value(), &v) != nil || v.Token != 0 {
			return "", false
		}
	}
	return string(name), true
}
