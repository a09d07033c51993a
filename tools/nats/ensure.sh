#!/bin/sh
# ensure.sh builds nats-server v2.15.2 (Apache-2.0) from this tool module,
# unless it is cached (tools/build.sh), and prints the binary's path on
# stdout. Usage: TENURE_NATS_BIN=$(tools/nats/ensure.sh)
#
# store/natsstore needs nats-server 2.11 or later (per-key TTLs on
# JetStream KV buckets); the nats-server of Debian bookworm is 2.9, too old.
# A cold build takes about three minutes on two busy cores.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
exec "$dir/../build.sh" "$dir" nats nats-server github.com/nats-io/nats-server/v2 --version
