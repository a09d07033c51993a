package fence

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/tenure-dev/tenure/store"
)

// idempotencyDomain separates these keys' hash input from every other use
// of SHA-256; the version in it changes only if the format ever must.
const idempotencyDomain = "tenure idempotency key v1"

// IdempotencyKeyPrefix starts every key [IdempotencyKey] returns.
const IdempotencyKeyPrefix = "tenure-"

// IdempotencyKey returns the idempotency key of one step of the work done
// under one tenure: the step named step of lease name lease, held with
// token tok. Hand it to a provider that deduplicates by key (a payment
// API's Idempotency-Key header, a mail service's message id, a queue's
// deduplication id), so that the step has one effect however often it is
// sent.
//
// The same triple always gives the same key: in every process, on every
// platform, in every version of tenure, so a step retried after a crash or
// a deploy reuses its key. Distinct triples give distinct keys, whatever
// the fields contain. A key is IdempotencyKeyPrefix followed by 32
// lowercase hex digits (39 ASCII characters, within every provider's limit
// we know of): the first 16 bytes of SHA-256 over the text "tenure
// idempotency key v1", then the lease name and the step, each preceded by
// its length in bytes as a big-endian uint64, and the token as a big-endian
// int64 between them. Any language can compute it the same way.
//
// # Why the token is in it
//
// A side effect that cannot check a token (an email, a charge through a
// third-party API) cannot be fenced, but the provider's idempotency key is
// the same insight wearing a different hat: the receiving end decides
// (promise P4). A retried or duplicated step under one tenure (a timeout
// after the request left, two clones of one holder with one token) is one
// effect, because it carries one key.
//
// A new tenure makes a new key, so a new holder repeats the step. That is
// right only when the work really should run again under the new tenure
// (tonight's report, sent by whoever holds the lease tonight). An effect
// that must happen once per piece of work no matter which tenure attempts
// it (charging invoice 42) must not change key with the tenure: key it by
// the work itself, with the provider's own means, not with this function.
//
// tok is the tenure's token as the lease reports it. A [tenure.Lease]
// whose Token is 0 is no longer trusted: still a key, but do not perform
// the step.
func IdempotencyKey(lease string, tok store.Token, step string) string {
	h := sha256.New()
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	h.Write([]byte(idempotencyDomain))
	field(lease)
	binary.BigEndian.PutUint64(n[:], uint64(tok))
	h.Write(n[:])
	field(step)
	sum := h.Sum(nil)
	return IdempotencyKeyPrefix + hex.EncodeToString(sum[:16])
}
