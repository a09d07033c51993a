#!/bin/sh
# ensure.sh builds the MinIO server of 12 February 2026
# (github.com/minio/minio v0.0.0-20260212201848-7aac2a2c5b7c, AGPL-3.0) from
# this tool module, unless it is cached (tools/build.sh), and prints the
# binary's path on stdout. Usage: TENURE_MINIO_BIN=$(tools/minio/ensure.sh)
#
# MinIO is a test server for fence/s3fence, an S3 object store that supports
# conditional PUT (If-Match, If-None-Match). It is AGPL-3.0: it is built here,
# in a module of its own, and run as a separate process by the tests; the
# library never imports or links it. Keep it that way.
#
# A cold build (empty build cache) took 21 minutes on two cores shared with
# other builds: 10.3 CPU-minutes (476 s user, 144 s system), 1.5 GB resident
# at most; on two idle cores that would be about 6 minutes (not measured).
# The binary is 150 MB.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
exec "$dir/../build.sh" "$dir" minio minio github.com/minio/minio --version
