package s3fence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence/s3fence"
	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/s3server"
	"github.com/tenure-dev/tenure/store"
)

func TestMain(m *testing.M) {
	testserver.Main(m, s3server.Shared)
}

// testBundle is a bucket of its own on the shared server, and a client.
type testBundle struct {
	client *s3.Client
	bucket string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	m := s3server.Shared.Get(t)
	return &testBundle{client: m.Client(t), bucket: m.Bucket(t)}
}

func (b *testBundle) input(key, body string) *s3.PutObjectInput {
	return &s3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key), Body: strings.NewReader(body)}
}

// put makes a fenced write of body to key through c (the bundle's
// client when nil).
func (b *testBundle) put(t *testing.T, c s3fence.Client, tok store.Token, key, body string) error {
	t.Helper()
	if c == nil {
		c = b.client
	}
	_, err := s3fence.Put(t.Context(), c, tok, b.input(key, body))
	return err
}

// rawPut writes key without the fence: body, and the token metadata when
// tok is not empty.
func (b *testBundle) rawPut(ctx context.Context, key, body, tok string) error {
	in := b.input(key, body)
	if tok != "" {
		in.Metadata = map[string]string{s3fence.MetadataKey: tok}
	}
	_, err := b.client.PutObject(ctx, in)
	return err
}

// object is what an object holds.
type object struct {
	body, token, etag string
}

// get reads key (version when not empty) and its token metadata.
func (b *testBundle) get(t *testing.T, key, version string) object {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)}
	if version != "" {
		in.VersionId = aws.String(version)
	}
	out, err := b.client.GetObject(t.Context(), in)
	require.NoError(t, err)
	defer func() { require.NoError(t, out.Body.Close()) }()
	body, err := io.ReadAll(out.Body)
	require.NoError(t, err)
	return object{body: string(body), token: out.Metadata[s3fence.MetadataKey], etag: aws.ToString(out.ETag)}
}

func (b *testBundle) requireRecorded(t *testing.T, key string, want store.Token) {
	t.Helper()
	got, err := s3fence.Recorded(t.Context(), b.client, b.bucket, key)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// requireFenced checks that err is a fence's refusal of offered because
// recorded was accepted for res.
func requireFenced(t *testing.T, err error, res string, offered, recorded store.Token) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrFenced)
	var fe *store.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, store.FencedError{Resource: res, Offered: offered, Recorded: recorded}, *fe)
	require.ErrorContains(t, err, fmt.Sprintf("already accepted token %d; token %d is stale", recorded, offered))
}

func TestPut(t *testing.T) {
	t.Parallel()

	t.Run("FirstWrite", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.requireRecorded(t, "k", 0)
		out, err := s3fence.Put(t.Context(), b.client, 3, b.input("k", "three"))
		require.NoError(t, err)
		got := b.get(t, "k", "")
		require.Equal(t, object{body: "three", token: "3", etag: aws.ToString(out.ETag)}, got)
		b.requireRecorded(t, "k", 3)
	})

	t.Run("HigherTokenReplaces", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.put(t, nil, 3, "k", "three"))
		require.NoError(t, b.put(t, nil, 5, "k", "five"))
		got := b.get(t, "k", "")
		require.Equal(t, "five", got.body)
		require.Equal(t, "5", got.token)
	})

	t.Run("StaleTokenRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.put(t, nil, 5, "k", "five"))
		before := b.get(t, "k", "")
		requireFenced(t, b.put(t, nil, 3, "k", "three"), b.bucket+"/k", 3, 5)
		requireFenced(t, b.put(t, nil, 4, "k", "five"), b.bucket+"/k", 4, 5)
		require.Equal(t, before, b.get(t, "k", ""), "a refused write changes nothing")
	})

	// Equal tokens pass: a retried write of one tenure, or a clone of its
	// holder, writes again.
	t.Run("EqualTokenAccepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.put(t, nil, 5, "k", "first"))
		require.NoError(t, b.put(t, nil, 5, "k", "second"))
		require.NoError(t, b.put(t, nil, 5, "k", "second"), "the same bytes again under the same token")
		require.Equal(t, object{body: "second", token: "5", etag: b.get(t, "k", "").etag}, b.get(t, "k", ""))
	})

	t.Run("MetadataAndBodyPosition", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := bytes.NewReader([]byte("skip:payload"))
		_, err := body.Seek(5, io.SeekStart)
		require.NoError(t, err)
		in := &s3.PutObjectInput{
			Bucket: aws.String(b.bucket), Key: aws.String("dir/k"), Body: body,
			ContentType: aws.String("text/plain"), Metadata: map[string]string{"owner": "billing"},
		}
		_, err = s3fence.Put(t.Context(), b.client, 7, in)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"owner": "billing"}, in.Metadata, "the caller's input is left alone")
		require.Nil(t, in.IfMatch)
		require.Nil(t, in.IfNoneMatch)
		head, err := b.client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: in.Bucket, Key: in.Key})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"owner": "billing", s3fence.MetadataKey: "7"}, head.Metadata)
		require.Equal(t, "text/plain", aws.ToString(head.ContentType))
		require.Equal(t, "payload", b.get(t, "dir/k", "").body)
	})

	t.Run("EmptyBody", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := s3fence.Put(t.Context(), b.client, 1, &s3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String("k")})
		require.NoError(t, err)
		require.Equal(t, object{token: "1", etag: b.get(t, "k", "").etag}, b.get(t, "k", ""))
	})

	// An object written without the fence carries no token: any token
	// replaces it. One whose metadata is not a token is left alone.
	t.Run("ObjectWrittenWithoutTheFence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.rawPut(t.Context(), "plain", "plain", ""))
		b.requireRecorded(t, "plain", 0)
		require.NoError(t, b.put(t, nil, 1, "plain", "fenced"))
		require.Equal(t, "1", b.get(t, "plain", "").token)

		for _, bad := range []string{"abc", "0", "-3", "+3", "03", "9223372036854775808", "3.0"} {
			require.NoError(t, b.rawPut(t.Context(), "bad", "by hand", bad))
			err := b.put(t, nil, 9, "bad", "fenced")
			require.ErrorContains(t, err, "not a token", bad)
			require.NotErrorIs(t, err, store.ErrFenced)
			require.Equal(t, "by hand", b.get(t, "bad", "").body, bad)
			_, err = s3fence.Recorded(t.Context(), b.client, b.bucket, "bad")
			require.ErrorContains(t, err, "not a token", bad)
		}
	})

	// Deleting the object forgets its token, as the package documentation
	// says.
	t.Run("DeletionForgets", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.put(t, nil, 5, "k", "five"))
		_, err := b.client.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String("k")})
		require.NoError(t, err)
		require.NoError(t, b.put(t, nil, 3, "k", "three"))
		require.Equal(t, "3", b.get(t, "k", "").token)
	})
}

// TestBytesThatComeBack shows on the server why a write may not put back
// the object's bytes under a greater token (the package documentation,
// "Bytes that come back"), and that Put refuses it.
func TestBytesThatComeBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	// The ETag is the MD5 of the bytes: new metadata on the same bytes
	// leaves it as it was, so a conditional write made against the old
	// object still passes.
	require.NoError(t, b.rawPut(ctx, "raw", "A", "5"))
	old := b.get(t, "raw", "")
	in := b.input("raw", "A")
	in.Metadata, in.IfMatch = map[string]string{s3fence.MetadataKey: "7"}, aws.String(old.etag)
	_, err := b.client.PutObject(ctx, in)
	require.NoError(t, err)
	require.Equal(t, object{body: "A", token: "7", etag: old.etag}, b.get(t, "raw", ""))
	stale := b.input("raw", "stale")
	stale.Metadata, stale.IfMatch = map[string]string{s3fence.MetadataKey: "6"}, aws.String(old.etag)
	_, err = b.client.PutObject(ctx, stale)
	require.NoError(t, err, "the server took the stale write: the ETag did not change")

	// Put refuses the case it can see, and writes nothing.
	require.NoError(t, b.put(t, nil, 5, "k", "A"))
	before := b.get(t, "k", "")
	err = b.put(t, nil, 7, "k", "A")
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorContains(t, err, "byte for byte the object's current content")
	require.Equal(t, before, b.get(t, "k", ""))
	require.NoError(t, b.put(t, nil, 5, "k", "A"), "under the same token the same bytes are the same state")
	require.NoError(t, b.put(t, nil, 7, "k", "A under 7"))
}

// meddler is a client through which another writer changes the object
// after each of the fence's reads, before its write: the server refuses
// the write with 412 and the fence has to read again.
type meddler struct {
	s3fence.Client
	heads atomic.Int32
	// meddle runs after the n-th HEAD (from 1).
	meddle func(ctx context.Context, n int) error
	// afterPut, when set, is told how each PUT ended.
	afterPut func(err error)
}

func (m *meddler) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	out, err := m.Client.PutObject(ctx, in, opts...)
	if m.afterPut != nil {
		m.afterPut(err)
	}
	return out, err
}

func (m *meddler) HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	out, err := m.Client.HeadObject(ctx, in, opts...)
	if err := m.meddle(ctx, int(m.heads.Add(1))); err != nil {
		return nil, fmt.Errorf("meddle: %w", err)
	}
	return out, err
}

func TestConflict(t *testing.T) {
	t.Parallel()

	once := func(f func(ctx context.Context) error) func(context.Context, int) error {
		return func(ctx context.Context, n int) error {
			if n == 1 {
				return f(ctx)
			}
			return nil
		}
	}

	t.Run("LowerTokenInBetween", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.put(t, nil, 1, "k", "one"))
		m := &meddler{Client: b.client, meddle: once(func(ctx context.Context) error { return b.rawPut(ctx, "k", "two", "2") })}
		body := strings.NewReader("xxfive")
		_, err := body.Seek(2, io.SeekStart)
		require.NoError(t, err)
		in := b.input("k", "")
		in.Body = body
		_, err = s3fence.Put(t.Context(), m, 5, in)
		require.NoError(t, err)
		require.EqualValues(t, 2, m.heads.Load(), "one refused write, one read again")
		require.Equal(t, object{body: "five", token: "5", etag: b.get(t, "k", "").etag}, b.get(t, "k", ""),
			"the second attempt sent the body again from where it was")
	})

	t.Run("HigherTokenInBetween", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.put(t, nil, 1, "k", "one"))
		m := &meddler{Client: b.client, meddle: once(func(ctx context.Context) error { return b.rawPut(ctx, "k", "nine", "9") })}
		requireFenced(t, b.put(t, m, 5, "k", "five"), b.bucket+"/k", 5, 9)
		require.EqualValues(t, 2, m.heads.Load())
		require.Equal(t, "nine", b.get(t, "k", "").body)
	})

	t.Run("CreatedInBetween", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := &meddler{Client: b.client, meddle: once(func(ctx context.Context) error { return b.rawPut(ctx, "k", "two", "2") })}
		require.NoError(t, b.put(t, m, 5, "k", "five"))
		require.EqualValues(t, 2, m.heads.Load(), "If-None-Match refused the first write")
		require.Equal(t, "five", b.get(t, "k", "").body)

		m = &meddler{Client: b.client, meddle: once(func(ctx context.Context) error { return b.rawPut(ctx, "k2", "nine", "9") })}
		requireFenced(t, b.put(t, m, 5, "k2", "five"), b.bucket+"/k2", 5, 9)
		require.Equal(t, "nine", b.get(t, "k2", "").body)
	})

	t.Run("DeletedInBetween", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.put(t, nil, 1, "k", "one"))
		m := &meddler{Client: b.client, meddle: once(func(ctx context.Context) error {
			_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String("k")})
			return err
		})}
		require.NoError(t, b.put(t, m, 5, "k", "five"))
		require.EqualValues(t, 2, m.heads.Load(), "If-Match on a deleted object was refused")
		require.Equal(t, "five", b.get(t, "k", "").body)
	})

	t.Run("ContendedGivesUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.put(t, nil, 1, "k", "one"))
		m := &meddler{Client: b.client, meddle: func(ctx context.Context, n int) error {
			return b.rawPut(ctx, "k", "meddled "+strconv.Itoa(n), "2")
		}}
		f, err := s3fence.New(s3fence.Config{MaxAttempts: 3})
		require.NoError(t, err)
		_, err = f.Put(t.Context(), m, 5, b.input("k", "five"))
		require.ErrorIs(t, err, s3fence.ErrContended)
		require.NotErrorIs(t, err, store.ErrFenced)
		require.ErrorContains(t, err, "3 attempts")
		require.EqualValues(t, 3, m.heads.Load())
		require.Equal(t, "meddled 3", b.get(t, "k", "").body, "the fence wrote nothing")
	})

	// A ctx that ends after a refused write ends the write: nothing was
	// written.
	t.Run("ContextEndsWhileContended", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx, cancel := context.WithCancel(t.Context())
		m := &meddler{
			Client: b.client,
			meddle: func(ctx context.Context, n int) error {
				return b.rawPut(ctx, "k", "meddled", strconv.Itoa(n))
			},
			afterPut: func(err error) {
				if err != nil {
					cancel()
				}
			},
		}
		_, err := s3fence.Put(ctx, m, 5, b.input("k", "five"))
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorContains(t, err, "nothing was written")
		require.EqualValues(t, 1, m.heads.Load())
		require.Equal(t, "meddled", b.get(t, "k", "").body)
	})
}

// write is one fenced write a racer made and the fence accepted.
type write struct {
	token      store.Token
	body       string
	start, end int64 // order of the call's start and end among all calls
}

// history is the writes the server made to key, oldest first: the
// versions of a versioned bucket, with the token each carries.
func (b *testBundle) history(t *testing.T, key string) []object {
	t.Helper()
	out, err := b.client.ListObjectVersions(t.Context(), &s3.ListObjectVersionsInput{Bucket: aws.String(b.bucket), Prefix: aws.String(key)})
	require.NoError(t, err)
	require.False(t, aws.ToBool(out.IsTruncated))
	require.Empty(t, out.DeleteMarkers)
	var h []object
	for _, v := range slices.Backward(out.Versions) { // listed newest first
		require.Equal(t, key, aws.ToString(v.Key))
		h = append(h, b.get(t, key, aws.ToString(v.VersionId)))
	}
	return h
}

func (b *testBundle) versioned(t *testing.T) {
	t.Helper()
	_, err := b.client.PutBucketVersioning(t.Context(), &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(b.bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	require.NoError(t, err)
}

// violations checks a record of accepted writes against the server's
// history of key and returns what breaks the fence's promise: a write
// with a lower token after a higher one (in the server's order, and in
// real time: one call ended before the other began), a write the server
// made that no writer was told was accepted or the other way round, or
// a final object without the greatest token.
func violations(h []object, accepted []write) []string {
	var v []string
	byToken := map[string]write{}
	for _, w := range accepted {
		byToken[w.token.String()] = w
	}
	seen := map[string]bool{}
	var last store.Token
	for i, o := range h {
		w, ok := byToken[o.token]
		switch {
		case !ok:
			v = append(v, fmt.Sprintf("version %d carries token %q, which no accepted write had", i, o.token))
			continue
		case seen[o.token]:
			v = append(v, fmt.Sprintf("version %d: token %s twice", i, o.token))
		case w.body != o.body:
			v = append(v, fmt.Sprintf("version %d: token %s carries %q, written was %q", i, o.token, o.body, w.body))
		}
		seen[o.token] = true
		if w.token <= last {
			v = append(v, fmt.Sprintf("version %d: token %d after token %d", i, w.token, last))
		}
		last = max(last, w.token)
	}
	for _, w := range accepted {
		if !seen[w.token.String()] {
			v = append(v, fmt.Sprintf("accepted token %d is not in the history", w.token))
		}
	}
	for _, a := range accepted {
		for _, b := range accepted {
			if a.end < b.start && b.token < a.token {
				v = append(v, fmt.Sprintf("token %d was accepted after token %d had been", b.token, a.token))
			}
		}
	}
	if len(h) > 0 && len(accepted) > 0 {
		top := slices.MaxFunc(accepted, func(a, b write) int { return int(a.token - b.token) })
		if final := h[len(h)-1]; final.token != top.token.String() {
			v = append(v, fmt.Sprintf("the object carries token %s, not the greatest accepted, %d", final.token, top.token))
		}
	}
	return v
}

// race has writers write key in rounds, each with tokens that go up from
// round to round (new tenures) and are dealt in a random order within a
// round, without waiting for each other, through do, which reports
// whether the write was made. It returns the accepted writes and how many
// were refused.
func race(t *testing.T, writers, rounds int, do func(tok store.Token, body string) (bool, error)) ([]write, int) {
	t.Helper()
	var (
		mu       sync.Mutex
		accepted []write
		refused  int
		clock    atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, writers)
	)
	deals := make([][]int, rounds)
	for r := range deals {
		deals[r] = rand.Perm(writers)
	}
	for i := range writers {
		wg.Go(func() {
			for r := range rounds {
				tok := store.Token(r*writers + deals[r][i] + 1)
				body := fmt.Sprintf("writer %d, round %d, token %d", i, r, tok)
				start := clock.Add(1)
				ok, err := do(tok, body)
				end := clock.Add(1)
				if err != nil {
					errs <- fmt.Errorf("writer %d, token %d: %w", i, tok, err)
					return
				}
				mu.Lock()
				if ok {
					accepted = append(accepted, write{token: tok, body: body, start: start, end: end})
				} else {
					refused++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return accepted, refused
}

// TestRacingWriters has eight writers write one object in 25 rounds and
// checks every accepted write against the server's history of the
// object (a versioned bucket keeps every version, in the order the server
// made them). The same writers without the fence break the checker, so
// the checker can see what it looks for.
func TestRacingWriters(t *testing.T) {
	t.Parallel()
	const writers, rounds = 8, 25

	t.Run("Fenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.versioned(t)
		f, err := s3fence.New(s3fence.Config{MaxAttempts: 200})
		require.NoError(t, err)
		accepted, refused := race(t, writers, rounds, func(tok store.Token, body string) (bool, error) {
			_, err := f.Put(t.Context(), b.client, tok, b.input("k", body))
			var fe *store.FencedError
			switch {
			case errors.As(err, &fe):
				if fe.Recorded <= tok || fe.Offered != tok {
					return false, fmt.Errorf("refused with %+v: %w", *fe, err)
				}
				return false, nil
			case err != nil:
				return false, err
			}
			return true, nil
		})
		t.Logf("%d writes accepted, %d refused", len(accepted), refused)
		require.Greater(t, len(accepted), 1, "the writers took turns")
		require.Positive(t, refused, "the writers met stale tokens")
		h := b.history(t, "k")
		require.Empty(t, violations(h, accepted))
		top := slices.MaxFunc(accepted, func(a, b write) int { return int(a.token - b.token) })
		require.Equal(t, store.Token(writers*rounds), top.token, "the greatest token is never refused")
		b.requireRecorded(t, "k", top.token)
	})

	t.Run("UnfencedControl", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.versioned(t)
		accepted, _ := race(t, writers, rounds, func(tok store.Token, body string) (bool, error) {
			return true, b.rawPut(t.Context(), "k", body, tok.String())
		})
		require.NotEmpty(t, violations(b.history(t, "k"), accepted), "without the fence the checker must find stale writes")
	})
}

// counter counts the conditional writes a client makes and the creations
// (If-None-Match: *) that succeed.
type counter struct {
	s3fence.Client
	created, refused atomic.Int32
}

func (c *counter) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	out, err := c.Client.PutObject(ctx, in, opts...)
	switch {
	case err != nil:
		c.refused.Add(1)
	case aws.ToString(in.IfNoneMatch) == "*":
		c.created.Add(1)
	}
	return out, err
}

// TestConcurrentFirstWrite has writers with distinct tokens create one
// object at once, many times: exactly one creation succeeds, the others
// read again and decide again, the greatest token is always accepted and
// the object ends with it.
func TestConcurrentFirstWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.versioned(t)
	const writers, rounds = 6, 10
	var conflicts int32
	for r := range rounds {
		key := "k" + strconv.Itoa(r)
		c := &counter{Client: b.client}
		start := make(chan struct{})
		var wg sync.WaitGroup
		results := make([]error, writers)
		for i := range writers {
			wg.Go(func() {
				<-start
				_, results[i] = s3fence.Put(t.Context(), c, store.Token(i+1), b.input(key, "token "+strconv.Itoa(i+1)))
			})
		}
		close(start)
		wg.Wait()
		var accepted []write
		for i, err := range results {
			tok := store.Token(i + 1)
			if err != nil {
				var fe *store.FencedError
				require.ErrorAs(t, err, &fe, "token %d", tok)
				require.Greater(t, fe.Recorded, tok)
				continue
			}
			accepted = append(accepted, write{token: tok, body: "token " + tok.String()})
		}
		require.NoError(t, results[writers-1], "the greatest token is never refused")
		require.EqualValues(t, 1, c.created.Load(), "round %d: exactly one creation", r)
		require.Empty(t, violations(b.history(t, key), accepted), "round %d", r)
		require.Equal(t, "token "+strconv.Itoa(writers), b.get(t, key, "").body)
		conflicts += c.refused.Load()
	}
	t.Logf("%d conditional writes refused by the server in %d rounds", conflicts, rounds)
	require.Positive(t, conflicts, "the writers raced")
}

// recorder fails the test on any request: bad input must be refused
// before anything is sent.
type recorder struct {
	s3fence.Client
	t *testing.T
}

func (r recorder) HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	r.t.Error("HeadObject was sent")
	return nil, errors.New("sent")
}

func (r recorder) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	r.t.Error("PutObject was sent")
	return nil, errors.New("sent")
}

// readOnly is a body that cannot seek.
type readOnly struct{ io.Reader }

func TestInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	c := recorder{t: t}
	in := func(change func(*s3.PutObjectInput)) *s3.PutObjectInput {
		in := b.input("k", "v")
		change(in)
		return in
	}
	same := func(*s3.PutObjectInput) {}
	put := func(c s3fence.Client, tok store.Token, in *s3.PutObjectInput) error {
		_, err := s3fence.Put(ctx, c, tok, in)
		return err
	}
	for name, err := range map[string]error{
		"NilClient":      put(nil, 1, in(same)),
		"NilS3Client":    put((*s3.Client)(nil), 1, in(same)),
		"NilInput":       put(c, 1, nil),
		"TokenZero":      put(c, 0, in(same)),
		"TokenNegative":  put(c, -1, in(same)),
		"NoBucket":       put(c, 1, in(func(in *s3.PutObjectInput) { in.Bucket = nil })),
		"SlashInBucket":  put(c, 1, in(func(in *s3.PutObjectInput) { in.Bucket = aws.String("a/b") })),
		"NoKey":          put(c, 1, in(func(in *s3.PutObjectInput) { in.Key = aws.String("") })),
		"LongName":       put(c, 1, in(func(in *s3.PutObjectInput) { in.Key = aws.String(strings.Repeat("k", 255-len(b.bucket))) })),
		"ControlInKey":   put(c, 1, in(func(in *s3.PutObjectInput) { in.Key = aws.String("a\nb") })),
		"IfMatch":        put(c, 1, in(func(in *s3.PutObjectInput) { in.IfMatch = aws.String(`"x"`) })),
		"IfNoneMatch":    put(c, 1, in(func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })),
		"TokenMetadata":  put(c, 1, in(func(in *s3.PutObjectInput) { in.Metadata = map[string]string{"Fencing-Token": "9"} })),
		"BodyCannotSeek": put(c, 1, in(func(in *s3.PutObjectInput) { in.Body = readOnly{strings.NewReader("v")} })),
		"RecordedNoKey": func() error {
			_, err := s3fence.Recorded(ctx, c, b.bucket, "")
			return err
		}(),
	} {
		require.ErrorIs(t, err, store.ErrInvalid, name)
		require.True(t, strings.HasPrefix(err.Error(), "s3fence: "), "%s: %v", name, err)
	}
	require.NoError(t, put(b.client, 1, in(func(in *s3.PutObjectInput) {
		in.Key = aws.String(strings.Repeat("k", 255-len(b.bucket)-1))
	})), "the longest name passes")

	for _, n := range []int{-1, s3fence.MaxMaxAttempts + 1} {
		_, err := s3fence.New(s3fence.Config{MaxAttempts: n})
		require.ErrorIs(t, err, store.ErrInvalid, "MaxAttempts %d", n)
	}
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := b.put(t, nil, 1, "k", "v")
	require.NoError(t, err)
	_, err = s3fence.Put(ctx, b.client, 2, b.input("k", "w"))
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, err, context.Canceled)

	m := s3server.Own(t)
	c := m.Client(t)
	bucket := m.Bucket(t)
	m.Kill()
	_, err = s3fence.Put(t.Context(), c, 1, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorContains(t, err, "nothing was written", "the read failed")

	_, err = s3fence.Put(t.Context(), b.client, 1, &s3.PutObjectInput{Bucket: aws.String("no-such-bucket-" + b.bucket), Key: aws.String("k")})
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrUnavailable)
	require.ErrorContains(t, err, "NoSuchBucket")
}
