#!/bin/sh
# ensure.sh builds the etcd server from this tool module, unless a build for
# the same go.sum is already cached, and prints the binary's path on stdout.
# Everything else goes to stderr. Usage: TENURE_ETCD_BIN=$(tools/etcd/ensure.sh)
set -eu

dir=$(cd "$(dirname "$0")" && pwd)
cd "$dir"
# Build this module alone, whatever go.work may be around it.
export GOWORK=off

sum=$(sha256sum go.sum | cut -d' ' -f1)
out="$(go env GOCACHE)/tenure-tools/etcd-$sum"
bin="$out/etcd"

if [ ! -x "$bin" ]; then
	echo "ensure.sh: building etcd into $bin" >&2
	mkdir -p "$out"
	tmp="$out/etcd.tmp.$$"
	trap 'rm -f "$tmp"' EXIT
	go build -trimpath -o "$tmp" . >&2
	mv -f "$tmp" "$bin"
	echo "ensure.sh: built $("$bin" --version | head -n 1)" >&2
fi

echo "$bin"
