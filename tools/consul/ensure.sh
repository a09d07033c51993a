#!/bin/sh
# ensure.sh builds the Consul agent v1.16.3 (MPL-2.0) from this tool module,
# unless a build for the same go.sum is already cached, and prints the
# binary's path on stdout. Everything else goes to stderr.
#
# Usage: TENURE_CONSUL_BIN=$(tools/consul/ensure.sh)
#
# A cold build takes about 9 minutes on two cores; the binary is cached under
# "$(go env GOCACHE)/tenure-tools/consul-<sha256 of go.sum>/consul", so a
# change to go.sum builds a new one. Never move this module to Consul 1.15.10,
# 1.16.6 or later: those releases are under the BSL, not the MPL.
set -eu

dir=$(cd "$(dirname "$0")" && pwd)
cd "$dir"

# go.sum pins every checksum, so the checksum database is not needed; this
# only matters when go.sum is missing entries (two modules the checksum
# database does not serve).
GONOSUMDB=github.com/hashicorp/hcp-sdk-go,github.com/hashicorp/consul/envoyextensions
export GONOSUMDB

sum=$(sha256sum go.sum | cut -d' ' -f1)
out="$(go env GOCACHE)/tenure-tools/consul-$sum"
bin="$out/consul"

if [ ! -x "$bin" ]; then
	echo "ensure.sh: building consul into $bin (about 9 minutes cold)" >&2
	mkdir -p "$out"
	tmp="$out/consul.tmp.$$"
	trap 'rm -f "$tmp"' EXIT
	go build -trimpath -o "$tmp" github.com/hashicorp/consul >&2
	mv -f "$tmp" "$bin"
	echo "ensure.sh: built $("$bin" version | head -n 1)" >&2
fi

echo "$bin"
