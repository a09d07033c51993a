// Command kube-apiserver is the Kubernetes API server v1.37.2, built from a
// separate module so that its dependencies never enter the tenure library's
// module graph. The tests of store/k8sstore start it as a child process, over
// the etcd of the same module; tools/servers/ensure.sh builds it.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
