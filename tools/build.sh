#!/bin/sh
# build.sh builds a server from one of the tool modules beside it, unless a
# build of the same go.sum with the same flags is cached, and prints the binary's path
# on stdout; everything else goes to stderr. Each tool's ensure.sh calls it:
#
#   build.sh DIR KEY BINARY PACKAGE VERSION-ARG
#
# DIR is the tool module, BINARY the file to build, PACKAGE what go build
# builds ("." for the module's own main package) and VERSION-ARG what makes
# the binary print its version. The binary is cached under
# "$(go env GOCACHE)/tenure-tools/KEY-<sha256 of go.sum and the flags>/BINARY",
# so a change to go.sum or to the flags builds a new one, and the cache
# outlives the checkout.
#
# The servers are built without debug information (no DWARF from the
# compiler, no symbol table from the linker): the tests never debug them,
# and leaving it out cuts the cold build's compile and link work.
set -eu

dir=$1 key=$2 name=$3 pkg=$4 version=$5
cd "$dir"
# Build the module alone, whatever go.work may be around it.
export GOWORK=off

flags="-trimpath -gcflags=all=-dwarf=false -ldflags=-s"
sum=$({ cat go.sum; echo "$flags"; } | sha256sum | cut -d' ' -f1)
out="$(go env GOCACHE)/tenure-tools/$key-$sum"
bin="$out/$name"

if [ ! -x "$bin" ]; then
	echo "build.sh: building $name into $bin" >&2
	mkdir -p "$out"
	tmp="$out/$name.tmp.$$"
	trap 'rm -f "$tmp"' EXIT
	# shellcheck disable=SC2086 # the flags are separate words
	go build $flags -o "$tmp" "$pkg" >&2
	mv -f "$tmp" "$bin"
	echo "build.sh: built $("$bin" "$version" | head -n 1)" >&2
fi

echo "$bin"
