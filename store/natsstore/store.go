package natsstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
	_ store.TTLFloor = (*Store)(nil)
	_ store.Lister   = (*Store)(nil)
)

// casAttempts bounds how often a call retries a compare-and-set that lost
// a race with another writer of the same key before it reports the lease
// as it then is (or, for [Store.Acquire], gives up as unavailable).
const casAttempts = 3

// renewConcurrency is how many renewals of one batch are in flight at once.
const renewConcurrency = 64

// Headers the KV conventions and the server put on messages.
const (
	hdrOperation = "KV-Operation"       // DEL or PURGE on a deletion marker
	hdrMarker    = "Nats-Marker-Reason" // MaxAge on the marker of a TTL run out
	opDelete     = "DEL"
	reasonMaxAge = "MaxAge"
)

// Store keeps leases in a JetStream KV bucket; docs/STORES.md lists the
// optional interfaces of package store it implements. Make it with
// [Open]; it is safe for concurrent use.
type Store struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	stream jetstream.Stream
	// subjectPrefix is "$KV.<bucket>.", before every key.
	subjectPrefix string
	streamName    string

	closed atomic.Bool
	// done is closed by Close, ending every Listen.
	done      chan struct{}
	closeOnce sync.Once
}

// Open returns a store over the bucket cfg names, which [Migrate] (or
// `tenure migrate`) must have created. It refuses, with an error matching
// [store.ErrInvalid], a bucket whose configuration could hand a token out
// twice or end a lease before its TTL (see the package doc), and a missing
// bucket with one matching [store.ErrNotMigrated]. The caller owns js's
// connection and closes it after [Store.Close].
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if js == nil {
		return nil, fmt.Errorf("natsstore: %w: nil JetStream context", store.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, classify("open bucket "+cfg.Bucket, err)
	}
	streamName := "KV_" + cfg.Bucket
	stream, err := js.Stream(ctx, streamName)
	if err != nil {
		return nil, classify("open bucket "+cfg.Bucket, err)
	}
	if err := checkBucket(cfg.Bucket, stream.CachedInfo().Config); err != nil {
		return nil, err
	}
	return &Store{
		js: js, kv: kv, stream: stream,
		subjectPrefix: "$KV." + cfg.Bucket + ".",
		streamName:    streamName,
		done:          make(chan struct{}),
	}, nil
}

// checkBucket refuses a bucket whose stream could hand a token out twice
// or end a lease otherwise than by its own TTL.
func checkBucket(bucket string, c jetstream.StreamConfig) error {
	var problem string
	switch {
	case c.Storage != jetstream.FileStorage:
		problem = "keeps its messages in memory: a server restart empties it, ending every lease at once"
	case c.Mirror != nil || len(c.Sources) > 0:
		problem = "is a mirror or sources other streams: its sequence numbers are not those of the writes it accepts"
	case !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL <= 0:
		problem = "has no per-key TTLs (LimitMarkerTTL): leases would never expire"
	case c.MaxMsgsPerSubject != 1:
		problem = fmt.Sprintf("keeps a history of %d values per key (want 1): the server would stretch short TTLs to the marker TTL", c.MaxMsgsPerSubject)
	case c.MaxAge != 0:
		problem = fmt.Sprintf("expires every key after %s (its TTL): a longer lease would end early", c.MaxAge)
	case c.Discard != jetstream.DiscardNew:
		problem = "discards old messages when full: a live lease could vanish"
	default:
		return nil
	}
	return fmt.Errorf("natsstore: %w: bucket %q %s; use a bucket made by natsstore.Migrate (tenure migrate)", store.ErrInvalid, bucket, problem)
}

// Migrate creates the bucket cfg names, with file storage, a history of
// one value per key, per-key TTLs and markers of [MarkerTTL] (which needs
// nats-server 2.11 or later), on cfg.Replicas servers. A bucket that
// exists already is left as it is and checked as [Open] checks it.
func Migrate(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	if js == nil {
		return fmt.Errorf("natsstore: %w: nil JetStream context", store.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	_, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         cfg.Bucket,
		Description:    "tenure leases",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       cfg.Replicas,
		LimitMarkerTTL: MarkerTTL,
	})
	switch {
	case errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported):
		return fmt.Errorf("natsstore: migrate: the server does not support per-key TTLs; tenure needs nats-server 2.11 or later: %w", err)
	case errors.Is(err, jetstream.ErrBucketExists):
	case err != nil:
		return classify("migrate: create bucket "+cfg.Bucket, err)
	}
	s, err := Open(ctx, js, cfg)
	if err != nil {
		return err
	}
	return s.Close()
}

// Replicas returns how many servers keep the bucket's stream, as the
// server last reported it to this store. With fewer than 3, a power loss
// can lose writes the server acknowledged (see the package doc's failure
// modes), unless the server runs with sync_always, which a client cannot
// see.
func (s *Store) Replicas() int { return s.stream.CachedInfo().Config.Replicas }

// MinTTL returns [MinTTL] ([store.TTLFloor]).
func (s *Store) MinTTL() time.Duration { return MinTTL }

// Close ends every [Store.Listen]. It does not close the connection.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.done)
	})
	return nil
}

// value is what a lease's keys hold, JSON-encoded.
type value struct {
	Label    string `json:"l"`
	Instance string `json:"i"`
	// Token is the tenure's token. It is 0 on the first message of a
	// tenure begun by a natsstore before tokens had a clock floor, which
	// took that message's revision as the token.
	Token int64 `json:"t,omitempty"`
	Seq   int64 `json:"s"`
	// AcquiredAt is the acquiring process's wall clock, Unix nanoseconds.
	AcquiredAt int64 `json:"a"`
	// Payload is what the holder published with the tenure.
	Payload string `json:"p,omitempty"`
	// TTL is the tenure's TTL in seconds, on its first message, for the
	// announcement of the new tenure (Listen); 0 from earlier versions.
	TTL int64 `json:"ttl,omitempty"`
	// NextLabel and NextInstance name, on a release's deletion marker,
	// the head of the line when the lease was released (see line.go).
	NextLabel    string `json:"nl,omitempty"`
	NextInstance string `json:"ni,omitempty"`
}

func (v value) holder() store.Holder { return store.Holder{Label: v.Label, Instance: v.Instance} }

func newValue(h store.Holder, tok store.Token, seq int64, at int64) value {
	return value{Label: h.Label, Instance: h.Instance, Token: int64(tok), Seq: seq, AcquiredAt: at}
}

// lease is what the held key of a lease says.
type lease struct {
	rev      uint64 // revision of the key's last message; 0 when it has none
	live     bool   // a tenure is held
	released bool   // the last message is a deletion (a release)
	hasValue bool   // v is set: live, or a release that recorded its tenure
	v        value  // Token set
	ttl      time.Duration
	at       time.Time // when the server stored the key's last message, by its clock
}

// key returns the bucket key of name under kind ("h": held, "r": record).
// Lease names are any UTF-8; KV keys are not, hence base64url.
func key(kind, name string) string {
	return kind + "." + base64.RawURLEncoding.EncodeToString([]byte(name))
}

func (s *Store) subject(kind, name string) string { return s.subjectPrefix + key(kind, name) }

// readHeld reads the held key of name.
func (s *Store) readHeld(ctx context.Context, name string) (lease, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.subject("h", name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return lease{}, nil
	}
	if err != nil {
		return lease{}, classify("read lease "+name, err)
	}
	l := lease{rev: m.Sequence, at: m.Time}
	switch {
	case m.Header.Get(hdrOperation) != "":
		l.released = m.Header.Get(hdrOperation) == opDelete
	case m.Header.Get(hdrMarker) != "":
		l.released = m.Header.Get(hdrMarker) != reasonMaxAge
	default:
		l.live = true
		ttl, err := time.ParseDuration(m.Header.Get(jetstream.MsgTTLHeader))
		if err != nil || ttl <= 0 {
			return lease{}, fmt.Errorf("natsstore: lease %q: its held key (revision %d) has no TTL; was it written by another program?", name, m.Sequence)
		}
		l.ttl = ttl
	}
	if len(m.Data) == 0 {
		if l.live {
			return lease{}, fmt.Errorf("natsstore: lease %q: its held key (revision %d) is empty; was it written by another program?", name, m.Sequence)
		}
		return l, nil
	}
	if err := json.Unmarshal(m.Data, &l.v); err != nil {
		return lease{}, fmt.Errorf("natsstore: lease %q: its held key (revision %d) is not a tenure's: %w", name, m.Sequence, err)
	}
	if l.v.Token == 0 {
		l.v.Token = int64(m.Sequence)
	}
	l.hasValue = true
	return l, nil
}

// grant is the lease as it is: a held tenure, or a lease nobody holds.
func (l lease) grant(name string) store.Grant {
	if !l.live {
		return store.Grant{Name: name}
	}
	return store.Grant{Name: name, Holder: l.v.holder(), Token: store.Token(l.v.Token), Seq: l.v.Seq, Remaining: l.ttl, Payload: l.v.Payload}
}

// renewGrant is grant as a renewal reports it: without the payload.
func (l lease) renewGrant(name string) store.Grant {
	g := l.grant(name)
	g.Payload = ""
	return g
}

// publish writes v to subject if its last revision is expect (0: it has
// none), with a TTL unless ttl is 0, and returns the new revision.
func (s *Store) publish(ctx context.Context, subject string, data []byte, hdr nats.Header, expect uint64, ttl time.Duration) (uint64, error) {
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(s.streamName), jetstream.WithExpectLastSequencePerSubject(expect)}
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(ttl))
	}
	ack, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data, Header: hdr}, opts...)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// begin refuses a call on a closed store.
func (s *Store) begin() error {
	if s.closed.Load() {
		return fmt.Errorf("natsstore: %w", store.ErrClosed)
	}
	return nil
}

// Acquire implements [store.Store]: it reads the held key and, when no
// tenure is live, reads the record key and the server's clock at once,
// makes the token (see [nextToken]) and writes the new tenure with the
// revision it read as the expected last revision and the TTL as the
// message's TTL. Then it records the tenure under the record key, for
// [Store.Get] after the held key is gone.
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := p.Validate(); err != nil {
		return store.Grant{}, fmt.Errorf("natsstore: %w", err)
	}
	ttl, err := ttlSeconds(p.Name, p.TTL)
	if err != nil {
		return store.Grant{}, err
	}
	if err := s.begin(); err != nil {
		return store.Grant{}, err
	}
	for range casAttempts {
		l, err := s.readHeld(ctx, p.Name)
		if err != nil {
			return store.Grant{}, err
		}
		if l.live {
			g := l.grant(p.Name)
			held := &store.HeldError{Name: p.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, Remaining: g.Remaining, Payload: g.Payload}
			if p.Wait && g.Holder != p.Holder {
				// The line only orders followers: a refusal whose place
				// could not be written is still a refusal.
				held.Position, _ = s.queue(ctx, p, l)
			}
			return store.Grant{}, held
		}
		// The clock is read after the held key: a tenure that ended
		// before that read began before it too, so its token is below
		// the clock unless the clock went back.
		var rec recorded
		var now time.Time
		err = storekit.Each(2, 2, func(i int) (err error) {
			if i == 0 {
				rec, err = s.readRecord(ctx, p.Name)
			} else {
				now, err = s.serverClock(ctx, "acquire "+p.Name)
			}
			return err
		})
		if err != nil {
			return store.Grant{}, err
		}
		last := rec.v.Token
		if l.hasValue {
			last = max(last, l.v.Token)
		}
		tok, err := nextToken(p.Name, last, now)
		if err != nil {
			return store.Grant{}, err
		}
		v := newValue(p.Holder, tok, 1, time.Now().UnixNano())
		v.Payload = p.Payload
		v.TTL = int64(ttl / time.Second)
		data, err := json.Marshal(v)
		if err != nil {
			return store.Grant{}, fmt.Errorf("natsstore: acquire %q: %w", p.Name, err)
		}
		_, err = s.publish(ctx, s.subject("h", p.Name), data, nil, l.rev, ttl)
		if wrongLastSeq(err) {
			continue
		}
		if err != nil {
			return store.Grant{}, classify("acquire "+p.Name, err)
		}
		if err := s.record(ctx, p.Name, v, rec); err != nil {
			return store.Grant{}, err
		}
		return store.Grant{Name: p.Name, Holder: p.Holder, Token: tok, Seq: 1, Remaining: ttl, Payload: p.Payload}, nil
	}
	return store.Grant{}, fmt.Errorf("natsstore: acquire %q: %w: the lease changed under each of %d attempts; try again", p.Name, store.ErrUnavailable, casAttempts)
}

// nextToken returns the token of a new tenure of name: max(last + 1, now
// in microseconds), where last is the greatest token the lease's keys
// name and now the server's clock, read after them. last + 1 makes tokens
// grow while the stream keeps its messages; the clock makes them grow
// when it lost its last ones (a power loss of a server that had not
// written them to disk): a later grant reads a later clock.
func nextToken(name string, last int64, now time.Time) (store.Token, error) {
	if last == math.MaxInt64 {
		return 0, fmt.Errorf("natsstore: acquire %q: the lease's last token is %d, the greatest an int64 holds: tokens cannot grow any more", name, last)
	}
	return store.Token(max(last+1, now.UnixMicro())), nil
}

// recorded is what a lease's record key holds.
type recorded struct {
	rev uint64 // revision of the key's last message; 0 when it has none
	v   value  // zero when the key has no tenure (none, deleted, purged)
}

// readRecord reads the record key of name.
func (s *Store) readRecord(ctx context.Context, name string) (recorded, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.subject("r", name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return recorded{}, nil
	}
	if err != nil {
		return recorded{}, classify("read the record of lease "+name, err)
	}
	r := recorded{rev: m.Sequence}
	if len(m.Data) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(m.Data, &r.v); err != nil {
		return recorded{}, fmt.Errorf("natsstore: lease %q: its record key (revision %d) is not a tenure's: %w", name, m.Sequence, err)
	}
	return r, nil
}

// record writes v under name's record key unless the key records a later
// tenure already, with the revision of cur (the key as read before) as
// the expected last revision, so that of two racing writers the later
// tenure stays; after a lost race it reads the key again.
func (s *Store) record(ctx context.Context, name string, v value, cur recorded) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("natsstore: record %q: %w", name, err)
	}
	for i := range casAttempts {
		if i > 0 {
			if cur, err = s.readRecord(ctx, name); err != nil {
				return err
			}
		}
		if cur.v.Token >= v.Token {
			return nil
		}
		_, err = s.publish(ctx, s.subject("r", name), data, nil, cur.rev, 0)
		if !wrongLastSeq(err) {
			return classify("record "+name, err)
		}
	}
	return fmt.Errorf("natsstore: record %q: %w: the record changed under each of %d attempts", name, store.ErrUnavailable, casAttempts)
}

// Renew implements [store.Store]. NATS has no multi-key compare-and-set
// that sets per-message TTLs, so each lease is renewed on its own (a read,
// a write with the expected revision and a read back, see
// [Store.confirmRenewal]), up to 64 at once.
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, fmt.Errorf("natsstore: %w", err)
	}
	ttls := make([]time.Duration, len(ps))
	for i, p := range ps {
		ttl, err := ttlSeconds(p.Name, p.TTL)
		if err != nil {
			return nil, err
		}
		ttls[i] = ttl
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	rs := make([]store.RenewResult, len(ps))
	err := storekit.Each(len(ps), renewConcurrency, func(i int) (err error) {
		rs[i], err = s.renewOne(ctx, ps[i], ttls[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// renewOne renews one lease: a read of the held key, a check of holder,
// token and seq, and a write of seq+1 with the revision read as the
// expected last revision, so that a clone whose seq moved on, or a write
// between the read and the renewal, fails; then the write is read back
// ([Store.confirmRenewal]).
func (s *Store) renewOne(ctx context.Context, p store.RenewParams, ttl time.Duration) (store.RenewResult, error) {
	l, err := s.readHeld(ctx, p.Name)
	if err != nil {
		return store.RenewResult{}, err
	}
	if !l.live || l.v.holder() != p.Holder || store.Token(l.v.Token) != p.Token || l.v.Seq != p.Seq {
		return store.RenewResult{Grant: l.renewGrant(p.Name)}, nil
	}
	v := l.v
	v.Seq++
	data, err := json.Marshal(v)
	if err != nil {
		return store.RenewResult{}, fmt.Errorf("natsstore: renew %q: %w", p.Name, err)
	}
	rev, err := s.publish(ctx, s.subject("h", p.Name), data, nil, l.rev, ttl)
	if wrongLastSeq(err) {
		l, err := s.readHeld(ctx, p.Name)
		if err != nil {
			return store.RenewResult{}, err
		}
		return store.RenewResult{Grant: l.renewGrant(p.Name)}, nil
	}
	if err != nil {
		return store.RenewResult{}, classify("renew "+p.Name, err)
	}
	cur, err := s.confirmRenewal(ctx, p.Name, l, rev)
	if err != nil {
		return store.RenewResult{}, err
	}
	if cur.rev != rev {
		return store.RenewResult{Grant: cur.renewGrant(p.Name)}, nil
	}
	return store.RenewResult{Renewed: true, Grant: store.Grant{
		Name: p.Name, Holder: p.Holder, Token: p.Token, Seq: v.Seq, Remaining: ttl,
	}}, nil
}

// confirmRenewal reads back the held key of name after a renewal was
// stored as revision rev over the message prev, and returns it. When the
// renewal stands but was stored once prev's TTL had run out by the
// server's clock, its outcome is unknown: it returns an error matching
// [store.ErrUnavailable].
//
// nats-server ends a key whose TTL ran out in two steps with no lock
// between: it decides to, then writes its expiry marker as a rollup of
// the key, with no expected revision. A renewal stored between the two
// is acknowledged and then replaced by the marker. The server decides on
// its own clock, at or after prev's time plus its TTL, before the marker
// is stored: a renewal stored earlier than that cannot be caught between
// the steps, and one stored later may be replaced after it was read back.
func (s *Store) confirmRenewal(ctx context.Context, name string, prev lease, rev uint64) (lease, error) {
	cur, err := s.readHeld(ctx, name)
	if err != nil {
		return lease{}, fmt.Errorf("natsstore: renew %q: %w: the renewal was stored, and reading it back failed: %w", name, store.ErrUnavailable, err)
	}
	if cur.rev != rev {
		return cur, nil
	}
	if end := prev.at.Add(prev.ttl); prev.at.IsZero() || cur.at.IsZero() || !cur.at.Before(end) {
		return lease{}, fmt.Errorf("natsstore: renew %q: %w: the renewal was stored at %s by the server's clock, once the TTL of the lease's previous write had run out (at %s), so the server's expiry may still replace it; the lease is treated as lost, acquire it again",
			name, store.ErrUnavailable, cur.at.UTC().Format(time.RFC3339Nano), end.UTC().Format(time.RFC3339Nano))
	}
	return cur, nil
}

// Release implements [store.Store]: it writes a deletion marker carrying
// the tenure over the held key, with the revision it read as the expected
// last revision. The marker keeps the tenure's token, the floor of the
// next one's.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("natsstore: %w", err)
	}
	if err := s.begin(); err != nil {
		return err
	}
	for range casAttempts {
		// The line is read with the held key, so that the release can
		// name its head without a round trip more.
		var (
			l  lease
			ln line
		)
		err := storekit.Each(2, 2, func(i int) (err error) {
			if i == 0 {
				l, err = s.readHeld(ctx, p.Name)
			} else {
				ln, err = s.readLine(ctx, p.Name)
			}
			return err
		})
		if err != nil {
			return err
		}
		if !l.live || l.v.holder() != p.Holder || store.Token(l.v.Token) != p.Token {
			return fmt.Errorf("natsstore: release %q: %w", p.Name, store.ErrNotHeld)
		}
		marker := l.v
		next := ln.head(l.at, p.Holder)
		marker.NextLabel, marker.NextInstance = next.Label, next.Instance
		data, err := json.Marshal(marker)
		if err != nil {
			return fmt.Errorf("natsstore: release %q: %w", p.Name, err)
		}
		hdr := nats.Header{}
		hdr.Set(hdrOperation, opDelete)
		_, err = s.publish(ctx, s.subject("h", p.Name), data, hdr, l.rev, 0)
		if wrongLastSeq(err) {
			continue
		}
		return classify("release "+p.Name, err)
	}
	return fmt.Errorf("natsstore: release %q: %w: the lease changed under each of %d attempts; try again", p.Name, store.ErrUnavailable, casAttempts)
}

// Get implements [store.Store]. A held lease reports its full TTL as the
// time remaining (see the package doc).
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	if err := store.ValidateName(name); err != nil {
		return store.Record{}, fmt.Errorf("natsstore: %w", err)
	}
	if err := s.begin(); err != nil {
		return store.Record{}, err
	}
	l, err := s.readHeld(ctx, name)
	if err != nil {
		return store.Record{}, err
	}
	state := store.StateExpired
	switch {
	case l.live:
		return toRecord(name, l.v, store.StateHeld, l.ttl), nil
	case l.released && l.hasValue:
		return toRecord(name, l.v, store.StateReleased, 0), nil
	case l.released:
		state = store.StateReleased
	}
	m, err := s.stream.GetLastMsgForSubject(ctx, s.subject("r", name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return store.Record{}, fmt.Errorf("natsstore: lease %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return store.Record{}, classify("get "+name, err)
	}
	var v value
	if err := json.Unmarshal(m.Data, &v); err != nil {
		return store.Record{}, fmt.Errorf("natsstore: lease %q: its record key (revision %d) is not a tenure's: %w", name, m.Sequence, err)
	}
	return toRecord(name, v, state, 0), nil
}

func toRecord(name string, v value, state store.State, remaining time.Duration) store.Record {
	return store.Record{
		Grant:      store.Grant{Name: name, Holder: v.holder(), Token: store.Token(v.Token), Seq: v.Seq, Remaining: remaining, Payload: v.Payload},
		State:      state,
		AcquiredAt: time.Unix(0, v.AcquiredAt).UTC(),
	}
}

// ServerTime returns the wall clock of the server that keeps the bucket's
// stream, which is the clock its TTLs run on and the floor of its tokens,
// as it answered a stream info request. tenure doctor compares it with
// the host's.
func (s *Store) ServerTime(ctx context.Context) (time.Time, error) {
	if err := s.begin(); err != nil {
		return time.Time{}, err
	}
	return s.serverClock(ctx, "read the server's clock")
}

// serverClock reads the server's wall clock (see [Store.ServerTime]) for
// op.
func (s *Store) serverClock(ctx context.Context, op string) (time.Time, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return time.Time{}, classify(op, err)
	}
	if info.TimeStamp.IsZero() {
		return time.Time{}, fmt.Errorf("natsstore: %s: the server reported no time with its stream info; nats-server 2.10 or later does", op)
	}
	return info.TimeStamp, nil
}

// List implements [store.Lister]: every lease that has a record key (every
// lease ever acquired through this bucket), ordered by name, each read as
// [Store.Get] reads it: one request to list the keys, then one or two per
// lease.
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	lister, err := s.kv.ListKeysFiltered(ctx, "r.>")
	if err != nil {
		return nil, classify("list leases", err)
	}
	seen := map[string]struct{}{}
	var names []string
	for k := range lister.Keys() {
		enc, _ := strings.CutPrefix(k, "r.")
		name, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			continue // not a key this store wrote
		}
		if _, dup := seen[string(name)]; !dup {
			seen[string(name)] = struct{}{}
			names = append(names, string(name))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, classify("list leases", err)
	}
	slices.Sort(names)
	records := make([]store.Record, 0, len(names))
	for _, name := range names {
		r, err := s.Get(ctx, name)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) {
			continue
		}
		if err != nil {
			return nil, err
		}
		records = append(records, r)
	}
	return records, nil
}
