#!/bin/sh
# ensure.sh builds the etcd server v3.7.3 (Apache-2.0) from this tool
# module, unless it is cached (tools/build.sh), and prints the binary's
# path on stdout. Usage: TENURE_ETCD_BIN=$(tools/etcd/ensure.sh)
#
# A cold build takes about three minutes on two cores.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
exec "$dir/../build.sh" "$dir" etcd etcd . --version
