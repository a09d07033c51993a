#!/bin/sh
# build.sh builds the servers of one of the tool modules beside it, unless a
# build of the same go.sum with the same flags is cached, and prints the
# directory that holds them on stdout; everything else goes to stderr. Each
# tool's ensure.sh calls it:
#
#   build.sh DIR KEY PACKAGE...
#
# DIR is the tool module and each PACKAGE a main package go build builds
# from it, all in one go build: what they share compiles once. The binaries
# are cached in "$(go env GOCACHE)/tenure-tools/KEY-<sha256 of go.sum and
# the flags>/", so a change to go.sum or to the flags builds them again, and
# the cache outlives the checkout. Callers that come while a build runs wait
# for it (a lock file beside that directory) instead of building the same
# packages again beside it.
#
# The servers are built without debug information (no DWARF from the
# compiler, no symbol table from the linker): the tests never debug them,
# and leaving it out cuts the cold build's compile and link work.
set -eu

dir=$1 key=$2
shift 2
cd "$dir"
# Build the module alone, whatever go.work may be around it.
export GOWORK=off

flags="-trimpath -gcflags=all=-dwarf=false -ldflags=-s"
sum=$({ cat go.sum; echo "$flags"; } | sha256sum | cut -d' ' -f1)
out="$(go env GOCACHE)/tenure-tools/$key-$sum"
mkdir -p "$(dirname "$out")"

exec 9>"$out.lock"
flock 9
if [ ! -e "$out/built" ]; then
	echo "build.sh: building $* into $out" >&2
	rm -rf "$out"
	mkdir -p "$out"
	# shellcheck disable=SC2086 # the flags are separate words
	go build $flags -o "$out/" "$@" >&2
	touch "$out/built"
	echo "build.sh: built $(ls "$out" | grep -v '^built$' | tr '\n' ' ')" >&2
fi

echo "$out"
