#!/bin/sh
# ensure.sh builds nats-server v2.15.2 (Apache-2.0) from this tool module,
# unless a build for the same go.sum is already cached, and prints the
# binary's path on stdout. Everything else goes to stderr.
#
# Usage: TENURE_NATS_BIN=$(tools/nats/ensure.sh)
#
# store/natsstore needs nats-server 2.11 or later (per-key TTLs on
# JetStream KV buckets); the nats-server of Debian bookworm is 2.9, too old.
# A cold build takes about three minutes on two busy cores; the binary is cached under
# "$(go env GOCACHE)/tenure-tools/nats-<sha256 of go.sum>/nats-server", so a
# change to go.sum builds a new one.
set -eu

dir=$(cd "$(dirname "$0")" && pwd)
cd "$dir"
# Build this module alone, whatever go.work may be around it.
export GOWORK=off

sum=$(sha256sum go.sum | cut -d' ' -f1)
out="$(go env GOCACHE)/tenure-tools/nats-$sum"
bin="$out/nats-server"

if [ ! -x "$bin" ]; then
	echo "ensure.sh: building nats-server into $bin" >&2
	mkdir -p "$out"
	tmp="$out/nats-server.tmp.$$"
	trap 'rm -f "$tmp"' EXIT
	go build -trimpath -o "$tmp" github.com/nats-io/nats-server/v2 >&2
	mv -f "$tmp" "$bin"
	echo "ensure.sh: built $("$bin" --version | head -n 1)" >&2
fi

echo "$bin"
