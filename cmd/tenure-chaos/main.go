// Command tenure-chaos runs tenure's chaos harness: real worker processes
// holding a lease over a real store while a nemesis injects faults, and a
// checker over what reached the fenced resource. See its internal/chaos and
// docs/RELIABILITY.md.
package main

import (
	"os"
	"runtime"

	"github.com/tenure-dev/tenure/cmd/tenure-chaos/internal/chaos"
)

// init keeps the main goroutine on the process's first thread in the
// writer role, whose zombie modes end that thread alone (the thread-group
// leader then reads as a zombie while the process writes on).
func init() {
	if len(os.Args) > 1 && os.Args[1] == "writer" {
		runtime.LockOSThread()
	}
}

func main() {
	os.Exit(chaos.Main(os.Args[1:], os.Stdout, os.Stderr))
}
