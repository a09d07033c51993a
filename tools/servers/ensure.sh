#!/bin/sh
# ensure.sh builds the servers of this tool module, unless they are cached
# (tools/build.sh), and prints the path of the one named on stdout:
#
#   TENURE_ETCD_BIN=$(tools/servers/ensure.sh etcd)
#   TENURE_KUBE_APISERVER_BIN=$(tools/servers/ensure.sh kube-apiserver)
#   TENURE_NATS_BIN=$(tools/servers/ensure.sh nats-server)
#   TENURE_MINIO_BIN=$(tools/servers/ensure.sh minio)
#
# The module holds four servers the tests start as child processes, never
# linked into the library:
#   etcd v3.7.3 (Apache-2.0), store/etcdstore's server;
#   kube-apiserver v1.37.2 (Apache-2.0), store/k8sstore's, over that etcd;
#   nats-server v2.15.2 (Apache-2.0), store/natsstore's: it needs 2.11 or
#     later (per-key TTLs on JetStream KV buckets), and Debian bookworm's is
#     2.9, too old;
#   MinIO of 12 February 2026 (v0.0.0-20260212201848-7aac2a2c5b7c,
#     AGPL-3.0), fence/s3fence's S3 object store with conditional PUT
#     (If-Match, If-None-Match). It is AGPL-3.0: it is built here and run as
#     a separate process by the tests; the library never imports or links
#     it. Keep it that way.
#
# They share one module, so one version of what they have in common (gRPC,
# protobuf, the etcd client, OpenTelemetry, Prometheus, the x/ packages)
# and one go build, which compiles it once: 14 CPU-minutes cold with the
# flags of tools/build.sh (the same build's action graph puts the four
# built apart at 16.5, before counting the separate versions of what they
# share). Their pinned versions are kube-apiserver's, with etcd's, MinIO's
# and nats-server's requirements raised to them (go mod tidy's choice);
# each server is tested by the suite of the store it serves.
set -eu
case ${1:-} in
etcd | kube-apiserver | nats-server | minio) ;;
*)
	echo "usage: $0 etcd|kube-apiserver|nats-server|minio" >&2
	exit 2
	;;
esac
dir=$(cd "$(dirname "$0")" && pwd)
out=$("$dir/../build.sh" "$dir" servers ./etcd ./kube-apiserver github.com/minio/minio github.com/nats-io/nats-server/v2)
echo "$out/$1"
