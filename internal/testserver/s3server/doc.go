// Package s3server starts the S3-compatible object stores (MinIO)
// fence/s3fence's tests run against. It is a package of its own, not part
// of [testserver], because the AWS SDK is big: only the test binaries that
// talk to S3 should compile and link it.
//
// [Start] runs MinIO from $TENURE_MINIO_BIN (or minio on PATH;
// `tools/servers/ensure.sh minio` builds it, [Binary]) on a free loopback
// port, with a data directory and random root credentials of its own. [Server.Client]
// returns an S3 client with those credentials and [Server.Bucket] makes a
// bucket per test. A package's tests share one server through
// [testserver.Main] ([Shared]); a test that stops or restarts its server
// starts its own ([Own]).
//
// When the binary is missing or the server does not start, the test skips,
// or fails when the environment variable CI is set
// ([testutil.NeedServer]).
package s3server
