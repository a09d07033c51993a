//go:build !linux

package consulstoretest

import "os/exec"

// setDeathSignal does nothing where there is no parent-death signal: an
// agent outlives a test binary that crashes.
func setDeathSignal(*exec.Cmd) {}
