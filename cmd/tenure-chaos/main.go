// Command tenure-chaos runs tenure's chaos harness: real worker processes
// holding a lease over a real store while a nemesis injects faults, and a
// checker over what reached the fenced resource. See its internal/chaos and
// docs/RELIABILITY.md.
package main

import (
	"os"

	"github.com/tenure-dev/tenure/cmd/tenure-chaos/internal/chaos"
)

func main() {
	os.Exit(chaos.Main(os.Args[1:], os.Stdout, os.Stderr))
}
