#!/bin/sh
# ensure.sh builds the Consul agent v1.16.3 (MPL-2.0) from this tool module,
# unless it is cached (tools/build.sh), and prints the binary's path on
# stdout. Usage: TENURE_CONSUL_BIN=$(tools/consul/ensure.sh)
#
# A cold build takes about nine to fifteen minutes on two cores. Never move
# this module to Consul 1.15.10, 1.16.6 or later: those releases are under
# the BSL, not the MPL.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
# go.sum pins every checksum, so the checksum database is not needed; this
# only matters when go.sum is missing entries (two modules the checksum
# database does not serve).
GONOSUMDB=github.com/hashicorp/hcp-sdk-go,github.com/hashicorp/consul/envoyextensions
export GONOSUMDB
out=$("$dir/../build.sh" "$dir" consul github.com/hashicorp/consul)
echo "$out/consul"
