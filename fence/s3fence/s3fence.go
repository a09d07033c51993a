package s3fence

import (
	"context"
	"crypto/md5" //nolint:gosec // S3's ETag of an object written in one PUT is the MD5 of its bytes; it is compared, not trusted.
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/store"
)

// MetadataKey is the user metadata key that holds the token of the write
// an object carries: the header x-amz-meta-fencing-token, in decimal.
const MetadataKey = "fencing-token"

// DefaultMaxAttempts is [Config.MaxAttempts] when it is zero.
const DefaultMaxAttempts = 10

// MaxMaxAttempts is the largest [Config.MaxAttempts].
const MaxMaxAttempts = 1000

// Backoff between two attempts of one write: a random wait of up to
// backoffBase doubled per attempt, at most backoffCap.
const (
	backoffBase = 5 * time.Millisecond
	backoffCap  = 500 * time.Millisecond
)

// ErrContended is matched by a write that gave up because, at every
// attempt, another write changed the object between the fence's read and
// its conditional write, so the store refused the write. The write may be
// tried again with the same token.
var ErrContended = errors.New("tenure: s3fence: the object changed between every read and the conditional write")

// Client is what the fence needs of an S3 client: *[s3.Client] satisfies
// it. Wrap one to add logging, metrics or a fault of your own.
type Client interface {
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var _ Client = (*s3.Client)(nil)

// Config configures a [Fencer]. It is passed by value; the zero value means
// the defaults.
type Config struct {
	// MaxAttempts is how many times one write reads the object and tries
	// its conditional write before it gives up with [ErrContended], when
	// another write changes the object between the read and the write
	// each time. Each attempt is a HEAD and a PUT; between two attempts
	// the fence waits a random time that doubles per attempt, from 5 ms up
	// to 500 ms. Default (0): [DefaultMaxAttempts]; 1 to
	// [MaxMaxAttempts]. More attempts ride out more writers of one object
	// and make a write wait longer before it says so.
	MaxAttempts int
}

// Fencer makes fenced writes to S3 objects. Its methods are safe for
// concurrent use. The package-level functions use the default one.
type Fencer struct {
	attempts int
}

// New returns a Fencer configured by cfg.
func New(cfg Config) (*Fencer, error) {
	n := cfg.MaxAttempts
	switch {
	case n == 0:
		n = DefaultMaxAttempts
	case n < 0 || n > MaxMaxAttempts:
		return nil, fmt.Errorf("s3fence: %w: MaxAttempts %d must be 1 to %d (0 means %d)",
			store.ErrInvalid, n, MaxMaxAttempts, DefaultMaxAttempts)
	}
	return &Fencer{attempts: n}, nil
}

// defaultFencer serves the package-level functions; the default Config is
// always valid, so defaultErr is nil.
var defaultFencer, defaultErr = New(Config{})

// Put is [Fencer.Put] with the default configuration.
func Put(ctx context.Context, c Client, tok store.Token, in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
	if defaultErr != nil {
		return nil, defaultErr
	}
	return defaultFencer.Put(ctx, c, tok, in)
}

// Recorded is [Fencer.Recorded] with the default configuration.
func Recorded(ctx context.Context, c Client, bucket, key string) (store.Token, error) {
	if defaultErr != nil {
		return 0, defaultErr
	}
	return defaultFencer.Recorded(ctx, c, bucket, key)
}

// Resource is the resource name of the object key in bucket, which
// [fence.ValidateWrite] checks and a [*store.FencedError] carries:
// bucket + "/" + key.
func Resource(bucket, key string) string { return bucket + "/" + key }

// Put writes the object in describes (PutObject) when tok is equal to or
// greater than the token the object carries, and records tok on it as
// [MetadataKey] in the same request. When the object carries a greater
// token, Put fails with a [*store.FencedError] (matching
// [store.ErrFenced]) and writes nothing.
//
// It reads the object's token and ETag (HEAD) and writes with If-Match on
// that ETag, or with If-None-Match: * when there is no object, so the
// store itself refuses the write if anything changed the object after
// the read; then Put reads again and decides again, up to
// [Config.MaxAttempts] times ([ErrContended]). It returns the output of the
// write that was made.
//
// in names the bucket and key and may set anything PutObject takes except
// IfMatch, IfNoneMatch and a metadata key equal to [MetadataKey] (in any
// case), which are the fence's. in.Body must be nil (an empty object) or
// an [io.ReadSeeker]: each attempt sends it again from where it was when
// Put was called. Put leaves in as it was (it writes copies).
// Resource(bucket, key) must pass [fence.ValidateWrite] and tok must be
// positive; bad input fails with [store.ErrInvalid] before anything is
// sent.
//
// A write whose bytes are exactly the object's current bytes under a
// greater token is refused with [store.ErrInvalid] without writing: it
// would leave the ETag as it is (see the package documentation, "Bytes
// that come back").
func (f *Fencer) Put(ctx context.Context, c Client, tok store.Token, in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
	body, err := validatePut(c, tok, in)
	if err != nil {
		return nil, fmt.Errorf("s3fence: put: %w", err)
	}
	bucket, key := aws.ToString(in.Bucket), aws.ToString(in.Key)
	res := Resource(bucket, key)
	op := fmt.Sprintf("put %q", res)
	var (
		start int64
		sum   string // hex MD5 of the body: an ETag that would not change
	)
	h := md5.New() //nolint:gosec // See the import.
	if body != nil {
		if start, err = body.Seek(0, io.SeekCurrent); err != nil {
			return nil, fmt.Errorf("s3fence: %s: %w: the body cannot seek: %w", op, store.ErrInvalid, err)
		}
		if _, err := io.Copy(h, body); err != nil {
			return nil, fmt.Errorf("s3fence: %s: read the body: %w", op, err)
		}
	}
	sum = hex.EncodeToString(h.Sum(nil))
	head := headInput(in)
	for attempt := 1; ; attempt++ {
		cur, err := f.read(ctx, c, op, head)
		if err != nil {
			return nil, err
		}
		if cur.token > tok {
			return nil, fmt.Errorf("s3fence: %s: stop working under this token: %w", op,
				&store.FencedError{Resource: res, Offered: tok, Recorded: cur.token})
		}
		if cur.exists && tok > cur.token && strings.EqualFold(strings.Trim(cur.etag, `"`), sum) {
			return nil, fmt.Errorf("s3fence: %s: %w: the body is byte for byte the object's current content (ETag %s), which carries token %d: "+
				"written again under token %d it would keep its ETag, so a stale writer that read the object before could still write after it; "+
				"make the bytes of each write differ, for instance by putting the token in them; nothing was written",
				op, store.ErrInvalid, cur.etag, cur.token, tok)
		}
		put := *in
		put.Metadata = make(map[string]string, len(in.Metadata)+1)
		for k, v := range in.Metadata {
			put.Metadata[k] = v
		}
		put.Metadata[MetadataKey] = strconv.FormatInt(int64(tok), 10)
		if cur.exists {
			put.IfMatch = aws.String(cur.etag)
		} else {
			put.IfNoneMatch = aws.String("*")
		}
		if body != nil {
			if _, err := body.Seek(start, io.SeekStart); err != nil {
				return nil, fmt.Errorf("s3fence: %s: rewind the body: %w", op, err)
			}
		}
		out, err := c.PutObject(ctx, &put)
		if err == nil {
			return out, nil
		}
		if classify(err, true) != conflict {
			return nil, interpretError(op, true, err)
		}
		if attempt >= f.attempts {
			return nil, fmt.Errorf("s3fence: %s: %w: %d attempts, each refused by the store because another write changed the object after it was read (last: %w)",
				op, ErrContended, attempt, err)
		}
		if err := wait(ctx, attempt); err != nil {
			return nil, fmt.Errorf("s3fence: %s: %w (nothing was written): %w", op, store.ErrUnavailable, err)
		}
	}
}

// Recorded returns the token the object key in bucket carries: 0 when
// there is no object, or when it was written without the fence.
func (f *Fencer) Recorded(ctx context.Context, c Client, bucket, key string) (store.Token, error) {
	if err := validate(c, bucket, key, 1); err != nil {
		return 0, fmt.Errorf("s3fence: recorded: %w", err)
	}
	op := fmt.Sprintf("read the token of %q", Resource(bucket, key))
	cur, err := f.read(ctx, c, op, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	return cur.token, err
}

// current is what a HEAD found.
type current struct {
	exists bool
	etag   string
	token  store.Token
}

// read reads the object's ETag and token.
func (f *Fencer) read(ctx context.Context, c Client, op string, in *s3.HeadObjectInput) (current, error) {
	out, err := c.HeadObject(ctx, in)
	if err != nil {
		if classify(err, false) == notFound {
			return current{}, nil
		}
		return current{}, interpretError(op, false, err)
	}
	cur := current{exists: true, etag: aws.ToString(out.ETag)}
	if cur.etag == "" {
		return current{}, fmt.Errorf("s3fence: %s: the store sent no ETag for the object, so no write can be made conditional on it; nothing was written", op)
	}
	text, ok := metadata(out.Metadata)
	if !ok {
		return cur, nil // Written without the fence: no token accepted yet.
	}
	tok, err := parseToken(text)
	if err != nil {
		return current{}, fmt.Errorf("s3fence: %s: the object's metadata %s is %q, not a token: %w; something other than the fence wrote it; nothing was written",
			op, MetadataKey, text, err)
	}
	cur.token = tok
	return cur, nil
}

// metadata finds MetadataKey among the object's metadata, whatever the
// case of its key.
func metadata(m map[string]string) (string, bool) {
	if v, ok := m[MetadataKey]; ok {
		return v, true
	}
	for k, v := range m {
		if strings.EqualFold(k, MetadataKey) {
			return v, true
		}
	}
	return "", false
}

// parseToken reads a token as the fence writes it: a canonical positive
// decimal (no sign, no leading zero) up to 2^63 - 1.
func parseToken(s string) (store.Token, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return 0, err
	case v <= 0 || strconv.FormatInt(v, 10) != s:
		return 0, errors.New("not a canonical positive decimal")
	}
	return store.Token(v), nil
}

// headInput is the HEAD that reads what a write of in would replace: the
// same bucket, key, expected owner and SSE-C key.
func headInput(in *s3.PutObjectInput) *s3.HeadObjectInput {
	return &s3.HeadObjectInput{
		Bucket:               in.Bucket,
		Key:                  in.Key,
		ExpectedBucketOwner:  in.ExpectedBucketOwner,
		RequestPayer:         in.RequestPayer,
		SSECustomerAlgorithm: in.SSECustomerAlgorithm,
		SSECustomerKey:       in.SSECustomerKey,
		SSECustomerKeyMD5:    in.SSECustomerKeyMD5,
	}
}

// validatePut checks a write before anything is sent and returns its body
// (nil for none).
func validatePut(c Client, tok store.Token, in *s3.PutObjectInput) (io.ReadSeeker, error) {
	if in == nil {
		return nil, fmt.Errorf("%w: the PutObjectInput is nil", store.ErrInvalid)
	}
	if err := validate(c, aws.ToString(in.Bucket), aws.ToString(in.Key), tok); err != nil {
		return nil, err
	}
	res := Resource(aws.ToString(in.Bucket), aws.ToString(in.Key))
	switch {
	case in.IfMatch != nil || in.IfNoneMatch != nil:
		return nil, fmt.Errorf("%w: %q: IfMatch and IfNoneMatch are the fence's to set; leave them nil", store.ErrInvalid, res)
	}
	if _, ok := metadata(in.Metadata); ok {
		return nil, fmt.Errorf("%w: %q: metadata key %s is the fence's; leave it out", store.ErrInvalid, res, MetadataKey)
	}
	if in.Body == nil {
		return nil, nil
	}
	rs, ok := in.Body.(io.ReadSeeker)
	if !ok {
		return nil, fmt.Errorf("%w: %q: the body is a %T, not an io.ReadSeeker: the fence may send it more than once (bytes.NewReader and *os.File are ones)",
			store.ErrInvalid, res, in.Body)
	}
	return rs, nil
}

// validate checks what every call gets: a client, a bucket and a key, and
// a resource name and token that pass [fence.ValidateWrite], the rule
// every fence applies.
func validate(c Client, bucket, key string, tok store.Token) error {
	if sc, ok := c.(*s3.Client); ok && sc == nil {
		c = nil
	}
	switch {
	case c == nil:
		return fmt.Errorf("%w: client is nil", store.ErrInvalid)
	case bucket == "":
		return fmt.Errorf("%w: bucket is empty", store.ErrInvalid)
	case strings.Contains(bucket, "/"):
		return fmt.Errorf("%w: bucket %q contains a slash; name the bucket and the key apart", store.ErrInvalid, bucket)
	case key == "":
		return fmt.Errorf("%w: key is empty (bucket %q)", store.ErrInvalid, bucket)
	}
	return fence.ValidateWrite(Resource(bucket, key), tok)
}

// wait sleeps before attempt+1: a random time up to backoffBase doubled
// attempt-1 times, at most backoffCap, or until ctx ends.
func wait(ctx context.Context, attempt int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	limit := backoffCap
	if attempt < 20 {
		limit = min(backoffBase<<(attempt-1), backoffCap)
	}
	t := time.NewTimer(rand.N(limit) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
