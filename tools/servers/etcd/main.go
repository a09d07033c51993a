// Command etcd is the etcd server v3.7.3, built from a separate module so
// that its dependencies never enter the tenure library's module graph. The
// tests of store/etcdstore start it as a child process;
// tools/servers/ensure.sh builds it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
