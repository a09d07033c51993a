package k8sstore

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tenure-dev/tenure/store"
)

// relistenDelay is how long Listen waits before it watches again after a
// watch could not be made.
const relistenDelay = time.Second

// Listen implements [store.Notifier]: it watches the Lease objects bearing
// the store's prefix label and reports each release and each new tenure
// (a takeover); renewals are not announced, and an expiry is nothing the
// API server sees (see the package doc). What it sees counts as seen by
// the store: the time a tenure has left starts running when its write
// arrives here, not only when a call reads it. When a watch ends (the
// API server ends them after a while, or the connection broke) it
// watches again and reports the empty name.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, func(ctx context.Context, notify func(store.Notice)) {
		for ctx.Err() == nil {
			if s.watch(ctx, notify) {
				continue
			}
			select {
			case <-ctx.Done():
			case <-time.After(relistenDelay):
			}
		}
	})
}

// watch runs one watch, from the namespace's current resourceVersion,
// until ctx is done or the watch ends, and reports whether to watch again
// at once: true when the server ended it, false when it could not be made
// or sent an error (Listen waits a second then).
func (s *Store) watch(ctx context.Context, notify func(store.Notice)) bool {
	list, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: s.selector, Limit: 1})
	if err != nil {
		return false
	}
	w, err := s.leases.Watch(ctx, metav1.ListOptions{LabelSelector: s.selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return false
	}
	defer w.Stop()
	notify(store.Notice{})
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-w.ResultChan():
			if !ok { // the server ended the watch: watch again at once
				return ctx.Err() == nil
			}
			if ev.Type == watch.Error { // 410 Gone and the like: after a pause
				return false
			}
			if n, ok := s.announced(ev); ok {
				notify(n)
			}
		}
	}
}

// announced returns the notice a watch event makes: a release, a new
// tenure (seq 1) or a deletion of the object.
func (s *Store) announced(ev watch.Event) (store.Notice, bool) {
	obj, ok := ev.Object.(*coordinationv1.Lease)
	if !ok {
		return store.Notice{}, false
	}
	name := obj.Annotations[annName]
	if ObjectName(s.prefix, name) != obj.Name {
		return store.Notice{}, false
	}
	if ev.Type == watch.Deleted {
		return store.Notice{Name: name, Kind: store.NoticeChanged}, true
	}
	l, err := decode(name, obj)
	if err != nil {
		return store.Notice{}, false
	}
	remaining, stale := s.observe(name, l)
	switch {
	case stale:
		return store.Notice{}, false
	case l.released:
		return store.Notice{Name: name, Kind: store.NoticeReleased}, true
	case l.seq == 1 && remaining > 0:
		return store.Notice{Name: name, Kind: store.NoticeAcquired, Holder: l.holder, Remaining: remaining}, true
	}
	return store.Notice{}, false
}
