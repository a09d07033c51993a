// Package kubeserver starts the Kubernetes API servers tenure's tests and
// the chaos harness run against. It is a package of its own, not part of
// [testserver], because client-go is big: only the test binaries that
// talk to Kubernetes should compile and link it.
//
// [Start] runs kube-apiserver from $TENURE_KUBE_APISERVER_BIN (or
// kube-apiserver on PATH; `tools/servers/ensure.sh kube-apiserver` builds
// it, [Binary]) over an etcd of its own ([etcdserver.StartEtcd]), on a free loopback port,
// with RBAC on and two token users: an administrator ([Server.Admin]) and
// a worker that may do only what a RoleBinding grants ([Server.Worker]).
// [Server.Kubeconfig] writes a kubeconfig for the CLI. A package's tests
// share one server through [testserver.Main] ([Shared]); a test that
// stops or restarts its server starts its own ([Own]).
//
// When the binary is missing or the server does not start, the test skips,
// or fails when the environment variable CI is set
// ([testutil.NeedServer]).
//
// [Harness] adapts a server to [storetest.Harness] for store/k8sstore.
package kubeserver
