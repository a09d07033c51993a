package doctor

import (
	"os"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/supervise"
)

// CheckSupervision is the check of how tenure run supervises its command
// on this host.
const CheckSupervision = "supervision"

// checkSupervision says which supervision tenure run uses on this host:
// OK with a cgroup of the command's own (cgroup v2 or the v1 freezer), WARN with the subreaper and task
// scan alone.
func checkSupervision() Finding {
	ok, how := supervise.Mode()
	if ok {
		return Finding{Check: CheckSupervision, Status: OK, Detail: how}
	}
	fix := "run tenure as root, or in a delegated cgroup v2 subtree (systemd: Delegate=yes), on a host with cgroup v2 (or, as root, the cgroup v1 freezer) mounted: without a cgroup, when tenure dies, a process of the command its watchdog had not seen yet that left the tree and cleared its environment is not found"
	if os.Getenv(supervise.NoCgroupEnv) != "" {
		fix = "unset " + supervise.NoCgroupEnv + " unless tenure must not make cgroups on this host"
	}
	return Finding{Check: CheckSupervision, Status: Warn, Detail: how, Fix: fix}
}
