#!/bin/sh
# build.sh builds a server from one of the tool modules beside it, unless a
# build for the same go.sum is already cached, and prints the binary's path
# on stdout; everything else goes to stderr. Each tool's ensure.sh calls it:
#
#   build.sh DIR KEY BINARY PACKAGE VERSION-ARG
#
# DIR is the tool module, BINARY the file to build, PACKAGE what go build
# builds ("." for the module's own main package) and VERSION-ARG what makes
# the binary print its version. The binary is cached under
# "$(go env GOCACHE)/tenure-tools/KEY-<sha256 of go.sum>/BINARY", so a
# change to go.sum builds a new one, and the cache outlives the checkout.
set -eu

dir=$1 key=$2 name=$3 pkg=$4 version=$5
cd "$dir"
# Build the module alone, whatever go.work may be around it.
export GOWORK=off

sum=$(sha256sum go.sum | cut -d' ' -f1)
out="$(go env GOCACHE)/tenure-tools/$key-$sum"
bin="$out/$name"

if [ ! -x "$bin" ]; then
	echo "build.sh: building $name into $bin" >&2
	mkdir -p "$out"
	tmp="$out/$name.tmp.$$"
	trap 'rm -f "$tmp"' EXIT
	go build -trimpath -o "$tmp" "$pkg" >&2
	mv -f "$tmp" "$bin"
	echo "build.sh: built $("$bin" "$version" | head -n 1)" >&2
fi

echo "$bin"
