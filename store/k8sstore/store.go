package k8sstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
	_ store.Lister   = (*Store)(nil)
)

// Leases is what the store needs of one namespace's Lease objects.
// client-go's LeaseInterface, clientset.CoordinationV1().Leases(namespace),
// is one.
type Leases interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*coordinationv1.Lease, error)
	List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Labels and annotations of the Lease objects the store writes.
const (
	// LabelPrefix is the label that carries [Config.Prefix]; the store
	// lists and watches only objects that bear its own.
	LabelPrefix    = "tenure.dev/prefix"
	labelManagedBy = "app.kubernetes.io/managed-by"

	annName       = "tenure.dev/name"            // the exact lease name
	annState      = "tenure.dev/state"           // held or released
	annLabel      = "tenure.dev/holder-label"    // the tenure's holder
	annInstance   = "tenure.dev/holder-instance" //
	annToken      = "tenure.dev/token"           // decimal
	annSeq        = "tenure.dev/seq"             // decimal
	annTTL        = "tenure.dev/ttl-ms"          // the last write's TTL, in milliseconds
	annPayload    = "tenure.dev/payload"         // absent when empty
	annAcquiredAt = "tenure.dev/acquired-at"     // the acquirer's wall clock, RFC 3339, for people

	stateHeld     = "held"
	stateReleased = "released"
)

// casAttempts bounds how often a call retries a compare-and-set that lost
// a race with another writer of the same object before it reports the
// lease as it then is (or gives up as unavailable).
const casAttempts = 3

// renewConcurrency is how many renewals of one batch are in flight at once.
const renewConcurrency = 32

// Store keeps leases in Lease objects of one namespace; docs/STORES.md
// lists the optional interfaces of package store it implements. Make it
// with [New]; it is safe for concurrent use.
type Store struct {
	leases   Leases
	prefix   string
	selector string
	// now reads the monotonic clock that times what the store has seen.
	now func() time.Time

	mu sync.Mutex
	// seen is, by lease name, the last version of its object the store
	// saw and when it first saw that version: the clock of expiry.
	seen map[string]sighting

	gate *storekit.Gate
}

// sighting is one version of a lease's object and when the store first
// saw it, by its monotonic clock.
type sighting struct {
	l  lease
	at time.Time
}

// New returns a store over leases (one namespace's Lease objects). It
// makes no request: the namespace must exist, and the credentials need
// the permissions [Role] grants.
func New(leases Leases, cfg Config) (*Store, error) {
	if leases == nil {
		return nil, fmt.Errorf("k8sstore: %w: leases is nil; pass a namespace's Lease client, clientset.CoordinationV1().Leases(namespace)", store.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{
		leases:   leases,
		prefix:   cfg.Prefix,
		selector: LabelPrefix + "=" + cfg.Prefix,
		now:      time.Now,
		seen:     map[string]sighting{},
		gate:     storekit.NewGate("k8sstore", "k8sstore.New"),
	}, nil
}

// Close ends every [Store.Listen]; later calls fail with
// [store.ErrClosed]. It does not close the client.
func (s *Store) Close() error {
	s.gate.Close()
	return nil
}

// lease is what one version of a lease's object says.
type lease struct {
	obj        *coordinationv1.Lease
	version    string // the object's UID and resourceVersion: which write this is
	rv         string // the object's resourceVersion
	revision   int64  // rv as a number: an etcd revision, which orders writes
	released   bool
	holder     store.Holder
	token      store.Token
	seq        int64
	ttl        time.Duration
	payload    string
	acquiredAt time.Time
}

// decode reads the lease name keeps from obj, or says why obj is not a
// tenure's.
func decode(name string, obj *coordinationv1.Lease) (lease, error) {
	a := obj.Annotations
	bad := func(what string) (lease, error) {
		return lease{}, fmt.Errorf("k8sstore: lease %q: Lease object %s (resourceVersion %s) %s; was it written by another program?",
			name, obj.Name, obj.ResourceVersion, what)
	}
	if a[annName] != name {
		return bad(fmt.Sprintf("keeps lease %q", a[annName]))
	}
	l := lease{
		obj:     obj,
		version: string(obj.UID) + "/" + obj.ResourceVersion,
		rv:      obj.ResourceVersion,
		holder:  store.Holder{Label: a[annLabel], Instance: a[annInstance]},
		payload: a[annPayload],
	}
	switch a[annState] {
	case stateHeld:
	case stateReleased:
		l.released = true
	default:
		return bad(fmt.Sprintf("has state %q", a[annState]))
	}
	tok, err := strconv.ParseInt(a[annToken], 10, 64)
	if err != nil || tok <= 0 {
		return bad(fmt.Sprintf("has token %q", a[annToken]))
	}
	l.token = store.Token(tok)
	if l.revision, err = strconv.ParseInt(obj.ResourceVersion, 10, 64); err != nil {
		return lease{}, fmt.Errorf("k8sstore: lease %q: Lease object %s has resourceVersion %q, not a revision number; k8sstore needs a kube-apiserver over etcd",
			name, obj.Name, obj.ResourceVersion)
	}
	if l.seq, err = strconv.ParseInt(a[annSeq], 10, 64); err != nil || l.seq <= 0 {
		return bad(fmt.Sprintf("has seq %q", a[annSeq]))
	}
	ms, err := strconv.ParseInt(a[annTTL], 10, 64)
	if err != nil || ms <= 0 {
		return bad(fmt.Sprintf("has TTL %q ms", a[annTTL]))
	}
	l.ttl = time.Duration(ms) * time.Millisecond
	if at, err := time.Parse(time.RFC3339Nano, a[annAcquiredAt]); err == nil {
		l.acquiredAt = at.UTC()
	}
	return l, nil
}

// read gets the object of name, consistently (a quorum read); ok is
// false when there is none.
func (s *Store) read(ctx context.Context, name string) (l lease, ok bool, err error) {
	obj, err := s.leases.Get(ctx, ObjectName(s.prefix, name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return lease{}, false, nil
	}
	if err != nil {
		return lease{}, false, classify("read lease "+name, err)
	}
	l, err = decode(name, obj)
	return l, err == nil, err
}

// observe records that the store sees l now and returns the time l's
// tenure has left by the store's clock: its TTL less how long the store
// has seen this very version of the object. Zero or less: expired. A
// released lease has none. When the store has seen a later version
// already (a read that raced a write of this process), l is stale:
// observe records nothing and reports it, with the whole TTL.
func (s *Store) observe(name string, l lease) (remaining time.Duration, stale bool) {
	now := s.now()
	s.mu.Lock()
	sg, ok := s.seen[name]
	switch {
	case ok && l.revision < sg.l.revision:
		stale = true
		sg.at = now
	case !ok || sg.l.version != l.version:
		sg = sighting{l: l, at: now}
		sg.l.obj = nil // the store keeps what the object says, not the object
		s.seen[name] = sg
	}
	s.mu.Unlock()
	if l.released {
		return 0, stale
	}
	return l.ttl - now.Sub(sg.at), stale
}

// hint returns the version of name's object the store saw last, and how
// long ago it first saw it.
func (s *Store) hint(name string) (sighting, time.Duration, bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, ok := s.seen[name]
	return sg, now.Sub(sg.at), ok
}

func (l lease) grant(name string, remaining time.Duration) store.Grant {
	if l.released || remaining <= 0 {
		return store.Grant{Name: name}
	}
	return store.Grant{Name: name, Holder: l.holder, Token: l.token, Seq: l.seq, Remaining: remaining, Payload: l.payload}
}

// heldError reports l, held with remaining left.
func (l lease) heldError(name string, remaining time.Duration) *store.HeldError {
	return &store.HeldError{Name: name, Holder: l.holder, Token: l.token, Seq: l.seq, Remaining: remaining, Payload: l.payload}
}

// tenure writes a tenure's annotations and spec onto obj.
func tenure(obj *coordinationv1.Lease, name string, h store.Holder, tok store.Token, ttl time.Duration, payload string, now time.Time) {
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	a := obj.Annotations
	a[annName] = name
	a[annState] = stateHeld
	a[annLabel] = h.Label
	a[annInstance] = h.Instance
	a[annToken] = strconv.FormatInt(int64(tok), 10)
	a[annSeq] = "1"
	a[annTTL] = strconv.FormatInt(ttl.Milliseconds(), 10)
	a[annAcquiredAt] = now.UTC().Format(time.RFC3339Nano)
	delete(a, annPayload)
	if payload != "" {
		a[annPayload] = payload
	}
	id := h.String()
	secs := ttlSeconds(ttl)
	mt := metav1.NewMicroTime(now)
	obj.Spec.HolderIdentity = &id
	obj.Spec.LeaseDurationSeconds = &secs
	obj.Spec.AcquireTime = &mt
	obj.Spec.RenewTime = &mt
}

// ttlSeconds is ttl as the Lease's spec.leaseDurationSeconds, rounded up:
// for people and tools that read the spec; the store decides on the
// annotation's milliseconds.
func ttlSeconds(ttl time.Duration) int32 {
	return int32(min((ttl+time.Second-1)/time.Second, 1<<31-1))
}

// Acquire implements [store.Store]: it reads the lease's object and, when
// none exists, creates it with a token above the namespace's current
// resourceVersion; when it holds no live tenure (released, or unchanged
// for its TTL as far as this store has seen), it updates it with the
// resourceVersion it read as the precondition and the token one above the
// last. Two round trips, three to create.
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := p.Validate(); err != nil {
		return store.Grant{}, fmt.Errorf("k8sstore: %w", err)
	}
	if err := s.gate.Begin(ctx, "acquire"); err != nil {
		return store.Grant{}, err
	}
	for range casAttempts {
		l, ok, err := s.read(ctx, p.Name)
		if err != nil {
			return store.Grant{}, err
		}
		var written *coordinationv1.Lease
		if !ok {
			written, err = s.create(ctx, p)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
		} else {
			remaining, stale := s.observe(p.Name, l)
			if stale {
				continue
			}
			if remaining > 0 {
				return store.Grant{}, l.heldError(p.Name, remaining)
			}
			next := l.obj.DeepCopy()
			tenure(next, p.Name, p.Holder, l.token+1, p.TTL, p.Payload, time.Now())
			written, err = s.leases.Update(ctx, next, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue
			}
		}
		if err != nil {
			return store.Grant{}, classify("acquire "+p.Name, err)
		}
		return s.wrote(p.Name, written)
	}
	return store.Grant{}, fmt.Errorf("k8sstore: acquire %q: %w: the lease changed under each of %d attempts; try again", p.Name, store.ErrUnavailable, casAttempts)
}

// create creates the object of a lease that has none. Its token is one
// above the namespace's resourceVersion read just before: every token
// the store hands out is at most the resourceVersion of the write that
// hands it out, so a lease whose object was deleted starts above every
// token it had (see the package doc).
func (s *Store) create(ctx context.Context, p store.AcquireParams) (*coordinationv1.Lease, error) {
	list, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: s.selector, Limit: 1})
	if err != nil {
		return nil, err
	}
	rv, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil || rv < 0 {
		return nil, fmt.Errorf("the API server's resourceVersion %q is not a revision number; k8sstore needs a kube-apiserver over etcd", list.ResourceVersion)
	}
	obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name:   ObjectName(s.prefix, p.Name),
		Labels: map[string]string{LabelPrefix: s.prefix, labelManagedBy: "tenure"},
	}}
	tenure(obj, p.Name, p.Holder, store.Token(rv+1), p.TTL, p.Payload, time.Now())
	return s.leases.Create(ctx, obj, metav1.CreateOptions{})
}

// wrote records the object a write returned and reports it as a grant.
func (s *Store) wrote(name string, obj *coordinationv1.Lease) (store.Grant, error) {
	l, err := decode(name, obj)
	if err != nil {
		return store.Grant{}, err
	}
	remaining, _ := s.observe(name, l)
	return l.grant(name, remaining), nil
}

// Renew implements [store.Store]. Kubernetes has no transaction over
// several objects, so each lease is renewed on its own, up to 32 at once:
// a merge patch that advances seq, with the resourceVersion of the
// version the store last saw as its precondition. When the store saw the
// very tenure the params name, that is one round trip; otherwise (or when
// the precondition fails) it reads the object first.
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, fmt.Errorf("k8sstore: %w", err)
	}
	if err := s.gate.Begin(ctx, "renew"); err != nil {
		return nil, err
	}
	rs := make([]store.RenewResult, len(ps))
	err := storekit.Each(len(ps), renewConcurrency, func(i int) (err error) {
		rs[i], err = s.renewOne(ctx, ps[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// renewOne renews one lease: a compare-and-set on holder, token and seq,
// made a compare-and-set on the object's resourceVersion by checking the
// three against the version the patch is conditioned on.
func (s *Store) renewOne(ctx context.Context, p store.RenewParams) (store.RenewResult, error) {
	sg, age, ok := s.hint(p.Name)
	for attempt := 0; attempt < casAttempts; attempt++ {
		if !ok || attempt > 0 {
			l, found, err := s.read(ctx, p.Name)
			if err != nil {
				return store.RenewResult{}, err
			}
			if !found {
				return store.RenewResult{Grant: store.Grant{Name: p.Name}}, nil
			}
			s.observe(p.Name, l)
			sg, age, _ = s.hint(p.Name)
		}
		l := sg.l
		remaining := l.ttl - age
		if l.released || remaining <= 0 || l.holder != p.Holder || l.token != p.Token || l.seq != p.Seq {
			if attempt == 0 && ok {
				continue // what the store saw last may be old: read
			}
			g := l.grant(p.Name, remaining)
			g.Payload = ""
			return store.RenewResult{Grant: g}, nil
		}
		patch, err := renewal(l.rv, p)
		if err != nil {
			return store.RenewResult{}, fmt.Errorf("k8sstore: renew %q: %w", p.Name, err)
		}
		obj, err := s.leases.Patch(ctx, ObjectName(s.prefix, p.Name), types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if apierrors.IsNotFound(err) {
			return store.RenewResult{Grant: store.Grant{Name: p.Name}}, nil
		}
		if err != nil {
			return store.RenewResult{}, classify("renew "+p.Name, err)
		}
		g, err := s.wrote(p.Name, obj)
		if err != nil {
			return store.RenewResult{}, err
		}
		g.Payload = ""
		return store.RenewResult{Renewed: true, Grant: g}, nil
	}
	return store.RenewResult{}, fmt.Errorf("k8sstore: renew %q: %w: the lease changed under each of %d attempts", p.Name, store.ErrUnavailable, casAttempts)
}

// renewal is the merge patch that renews a tenure: seq+1 and the TTL, on
// the condition that the object is still at resourceVersion rv.
func renewal(rv string, p store.RenewParams) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": rv,
			"annotations": map[string]string{
				annSeq: strconv.FormatInt(p.Seq+1, 10),
				annTTL: strconv.FormatInt(p.TTL.Milliseconds(), 10),
			},
		},
		"spec": map[string]any{"leaseDurationSeconds": ttlSeconds(p.TTL), "renewTime": metav1.NewMicroTime(time.Now())},
	})
}

// Release implements [store.Store]: it reads the lease's object and, when
// it holds the tenure p names, live, marks it released with the
// resourceVersion it read as the precondition. The token stays on the
// object, so the next tenure's is greater.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("k8sstore: %w", err)
	}
	if err := s.gate.Begin(ctx, "release"); err != nil {
		return err
	}
	for range casAttempts {
		l, ok, err := s.read(ctx, p.Name)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("k8sstore: release %q: %w", p.Name, store.ErrNotHeld)
		}
		remaining, stale := s.observe(p.Name, l)
		if stale {
			continue
		}
		if remaining <= 0 || l.holder != p.Holder || l.token != p.Token {
			return fmt.Errorf("k8sstore: release %q: %w", p.Name, store.ErrNotHeld)
		}
		next := l.obj.DeepCopy()
		next.Annotations[annState] = stateReleased
		next.Spec.HolderIdentity = nil
		obj, err := s.leases.Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return classify("release "+p.Name, err)
		}
		_, err = s.wrote(p.Name, obj)
		return err
	}
	return fmt.Errorf("k8sstore: release %q: %w: the lease changed under each of %d attempts; try again", p.Name, store.ErrUnavailable, casAttempts)
}

// Get implements [store.Store]. A held lease's remaining time is its TTL
// less how long this store has seen the same version of its object: the
// full TTL when the store sees it for the first time (see the package
// doc).
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	if err := store.ValidateName(name); err != nil {
		return store.Record{}, fmt.Errorf("k8sstore: %w", err)
	}
	if err := s.gate.Begin(ctx, "get"); err != nil {
		return store.Record{}, err
	}
	l, ok, err := s.read(ctx, name)
	if err != nil {
		return store.Record{}, err
	}
	if !ok {
		return store.Record{}, fmt.Errorf("k8sstore: lease %q: %w", name, store.ErrNotFound)
	}
	return s.record(name, l), nil
}

// record reports l as the store sees it now.
func (s *Store) record(name string, l lease) store.Record {
	remaining, _ := s.observe(name, l)
	r := store.Record{
		Grant:      store.Grant{Name: name, Holder: l.holder, Token: l.token, Seq: l.seq, Payload: l.payload},
		State:      store.StateHeld,
		AcquiredAt: l.acquiredAt,
	}
	switch {
	case l.released:
		r.State = store.StateReleased
	case remaining <= 0:
		r.State = store.StateExpired
	default:
		r.Remaining = remaining
	}
	return r
}

// listPage is how many objects one list request asks for.
const listPage = 500

// List implements [store.Lister]: every lease with an object bearing the
// store's prefix label, ordered by name, in pages of 500 objects.
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	if err := s.gate.Begin(ctx, "list"); err != nil {
		return nil, err
	}
	var records []store.Record
	opts := metav1.ListOptions{LabelSelector: s.selector, Limit: listPage}
	for {
		list, err := s.leases.List(ctx, opts)
		if err != nil {
			return nil, classify("list leases", err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			name := obj.Annotations[annName]
			if ObjectName(s.prefix, name) != obj.Name {
				continue // not an object this store wrote
			}
			l, err := decode(name, obj)
			if err != nil {
				continue
			}
			records = append(records, s.record(name, l))
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	slices.SortFunc(records, func(a, b store.Record) int { return strings.Compare(a.Name, b.Name) })
	return records, nil
}
