package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
)

func progressCommand() *command {
	return &command{
		summary:  "tell the tenure run of this command that its work makes progress",
		synopsis: "progress",
		about: `Progress, run by the command of "tenure run --progress-timeout D" (or by
anything the command starts), tells that tenure run that the work is
alive, over the socket named by TENURE_RUN_CONTROL. Without a report for
D the lease is given up as lost ("progress stalled", exit 79), so that a
healthy holder can take over, and run --health answers 503 from the moment
the last report is D old. Call it where the work advances (after each
batch, each message), not from a timer of its own: a timer keeps
reporting while the work is wedged.

It prints nothing and exits 0 when the report was recorded; 79 when that
tenure run no longer holds the lease (the command should stop: its writes
are fenced); 69 when the tenure run cannot be reached; 64 outside a
tenure run command.`,
		setup: func(fs *flag.FlagSet) action {
			return func(_ context.Context, e *env, args []string) error {
				if len(args) != 0 {
					return usagef("progress", "takes no arguments, got %q", strings.Join(args, " "))
				}
				path, req, err := insideRun(e, "progress")
				if err != nil {
					return err
				}
				req.Op = opProgress
				rep, err := askControl(path, req)
				switch {
				case rep.NotHeld:
					return &exitError{code: ExitLost, err: err}
				case err != nil:
					return &exitError{code: ExitUnavailable, err: fmt.Errorf("progress: cannot reach the tenure run on %s: %s; is the tenure run that started this command still running?", path, message(err))}
				}
				return nil
			}
		},
	}
}

// insideRun returns the control socket and the tenure of the tenure run
// whose command runs cmd, from the environment tenure run gives it.
func insideRun(e *env, cmd string) (string, controlRequest, error) {
	path := e.getenv(EnvControl)
	if path == "" {
		return "", controlRequest{}, usagef(cmd, "%s is not set: run it from the command of `tenure run` (or a process that command starts), which sets it", EnvControl)
	}
	return path, controlRequest{Lease: e.getenv(EnvLease), Holder: e.getenv(EnvHolder), Token: tokenOf(e.getenv(EnvToken))}, nil
}

// tokenOf reads TENURE_TOKEN; 0 when it is not a token, which no tenure
// run takes as its own.
func tokenOf(s string) int64 {
	t, err := strconv.ParseInt(s, 10, 64)
	if err != nil || t <= 0 {
		return 0
	}
	return t
}
