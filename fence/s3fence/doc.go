// Package s3fence is the resource side of tenure's fencing for objects in
// S3 and S3-compatible stores (promise P4: the resource decides): a write
// of an object is made only when no greater token was accepted for it,
// and the object itself keeps the token of the write it carries.
//
//	lease, err := client.Campaign(ctx, "billing")
//	...
//	_, err = s3fence.Put(ctx, s3client, lease.Token(), &s3.PutObjectInput{
//		Bucket: aws.String("reports"),
//		Key:    aws.String("billing/latest.json"),
//		Body:   bytes.NewReader(report), // report names its token: see "Bytes that come back"
//	})
//	if errors.Is(err, store.ErrFenced) {
//		return err // superseded: a newer holder has written; stop
//	}
//
// The token may come from any tenure store: the fence only needs tokens
// that go up per lease, which every store promises (P2). It takes a
// [Client], which *s3.Client of github.com/aws/aws-sdk-go-v2 satisfies.
//
// # Calls
//
//   - [Put] ([Fencer.Put]): the fenced write, a PutObject of the caller's
//     making with the fence's token and condition added. A refused token
//     writes nothing.
//   - [Recorded]: the token the object carries (0 when none), for
//     operators and tests.
//
// The resource of a write is [Resource](bucket, key), "bucket/key": it
// must pass [fence.ValidateWrite] (so bucket, slash and key together are
// at most 255 bytes, although S3 takes keys of up to 1,024), and it is
// what a [*store.FencedError] names.
//
// # How a write is made
//
// The token lives on the object, as the user metadata [MetadataKey]
// (the header x-amz-meta-fencing-token, in decimal). A write reads the
// object's token and ETag (HEAD). When the token is greater than the
// writer's, the write is refused and no PUT is sent. Otherwise the write
// is a PUT carrying the new token, with If-Match: the ETag read, or with
// If-None-Match: * when there was no object. The check and the write are
// that one conditional request: the store makes the write only if the
// object is still the one that was read, so nothing can come between
// them. When the store answers 412 Precondition Failed (another write came
// first; also 409 ConditionalRequestConflict, and 404 NoSuchKey when the
// object was deleted), the fence reads again and decides again, up to
// [Config.MaxAttempts] times, with a random wait between attempts, before
// it gives up with [ErrContended].
//
// An object without the metadata (written without the fence, or before
// the fence was used) carries no token, and any token replaces it.
//
// # What it promises
//
// Once a fenced write carrying token y was made to an object, no fenced
// write carrying a token x < y is made to it, for as long as the object
// exists, every write to it goes through the fence, and the bytes of
// writes do not come back (next section). The object always carries the
// greatest token of the writes made so far. Equal tokens are accepted:
// a retried write of one tenure passes (it writes again), and so does a
// byte-identical clone of the holder, which carries the same token; the
// fence cannot tell two clones apart (a lease's renewal chain can, as
// pgfence's strict check does, and S3 cannot consult it).
//
// # Bytes that come back
//
// The condition is the ETag, and for an object written in one PUT
// without SSE-KMS or SSE-C the ETag is the MD5 of its bytes: the metadata,
// token included, is not part of it. A write that puts back bytes the
// object had before gives back the ETag it had then, and a stale writer
// that read the object at that time passes its If-Match again. For
// example: a stale holder reads bytes A under token 5; the new holder
// writes B, then A again, under token 7; the stale holder's write under
// token 6 then passes and replaces them. So the fence's promise needs the
// bytes of every write to differ from every earlier state of the object
// (except rewrites under the same token): put the token (or a write id)
// in the bytes, as a generation field in a JSON document, for one. Put
// refuses, with [store.ErrInvalid], the case it can see: bytes equal to
// the object's current bytes under a greater token.
//
// # What the object store must support
//
// Conditional PUT: If-Match with an ETag and If-None-Match: *, honoured
// atomically with the write. AWS S3 supports both since 2024 (general
// purpose buckets); MinIO does (the tests run against it, built from
// tools/servers). A store that ignores the headers makes this fence check
// and write in two steps, with a window in between, without any error:
// check yours. The writer needs s3:GetObject and s3:PutObject, and
// s3:ListBucket so that a HEAD of a missing object answers 404 rather
// than 403. Objects are written in one PUT (up to 5 GiB); multipart
// uploads are not fenced.
//
// # Tokens the store never issued
//
// The fence cannot check that a token was issued: S3 cannot read a lease
// store's counter. One write carrying a token nobody was issued (2^63 - 1,
// from a bug or a hostile caller) is kept on the object as the greatest,
// and every legitimate writer is refused from then on. Anyone allowed to
// write the object can also set the metadata directly or remove it: only
// the bucket's policy keeps such writers out. An operator repairs a
// poisoned object by writing it again with the last token the store
// handed out in x-amz-meta-fencing-token.
//
// # Errors
//
//   - A refusal matches [store.ErrFenced]; errors.As finds a
//     [*store.FencedError] with the resource, the token offered and the
//     token the object carries. Never log it and carry on (promise P9):
//     stop working under that token.
//   - A write that met another write at every attempt matches
//     [ErrContended]: the store refused each of its writes. (A client that
//     retries on its own, as *s3.Client does after a transport error, may
//     have resent a write that had been made and seen the resend refused.)
//     Trying again with the same token is safe.
//   - Transport errors, timeouts, a cancelled ctx, 5xx, 429 and SlowDown
//     answers match [store.ErrUnavailable]: when they came from the PUT,
//     the write may or may not have been made. Retrying with the same
//     token is safe: an equal token passes and writes the same bytes again.
//   - Other answers of the store (403 AccessDenied, 404 NoSuchBucket) come
//     back wrapped; errors.As finds the SDK's error. An object whose
//     metadata holds something other than a token is not written.
//   - Bad input (nil client or input, empty bucket or key, a bucket with a
//     slash, a resource name [fence.ValidateWrite] refuses, token 0 or
//     below, IfMatch or IfNoneMatch set, [MetadataKey] among the metadata,
//     a body that is not an io.ReadSeeker) matches [store.ErrInvalid] and
//     sends nothing. A [github.com/tenure-dev/tenure.Lease] whose Token
//     is 0 is no longer trusted: do not write.
//
// # What it cannot do
//
//   - Deleting the object forgets its token: the next write, stale or
//     not, creates it again. In a versioned bucket a delete marker does
//     the same. Do not delete fenced objects while writers may be alive, or
//     keep them in a bucket whose policy denies s3:DeleteObject to writers.
//   - A write made without the fence (a plain PutObject, a copy, a
//     multipart upload, a lifecycle rule) replaces the token or drops it;
//     the fence is only as good as the rule that every writer uses it.
//   - Two byte-identical clones of one holder carry the same token and
//     both pass (see "What it promises").
//   - Readers are not fenced: a GET sees whatever was last written.
package s3fence
