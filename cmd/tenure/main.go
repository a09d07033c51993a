// Command tenure runs a job under a lease with a fencing token, and
// inspects and administers leases. See `tenure help`, and package
// internal/cli for the details.
package main

import (
	"context"
	"os"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
)

func main() {
	// cli.Main handles signals itself: run forwards them to its command
	// instead of dying, status --watch stops on them.
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
