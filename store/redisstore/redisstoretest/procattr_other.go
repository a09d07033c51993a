//go:build !linux

package redisstoretest

import "os/exec"

// setProcAttr does nothing outside Linux: a server whose test binary
// crashed keeps running until killed by hand.
func setProcAttr(*exec.Cmd) {}
