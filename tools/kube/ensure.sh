#!/bin/sh
# ensure.sh builds kube-apiserver v1.37.2 (Apache-2.0) from this tool
# module, unless it is cached (tools/build.sh), and prints the binary's
# path on stdout. Usage: TENURE_KUBE_APISERVER_BIN=$(tools/kube/ensure.sh)
#
# store/k8sstore's tests start it over an etcd from tools/etcd. A cold
# build takes about fifteen minutes on two idle cores (half an hour beside
# other builds).
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
exec "$dir/../build.sh" "$dir" kube-apiserver kube-apiserver . --version
