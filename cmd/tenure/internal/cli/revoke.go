package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

func revokeInheritedCommand() *command {
	return &command{
		summary:  "for fork and restore hooks: drop leadership and identity this copy inherited",
		synopsis: "revoke-inherited [--remove PATH]...",
		about: `Revoke-inherited is for the hooks that run in a copy of a machine or process:
a VM snapshot restored (once, or twice: "a snapshot is a leader
factory"), a container checkpoint restored, a process forked. The copy
inherited its original's leadership and identity, and cannot know whether
it is the one that still does the work. Call it first thing in the
restore or fork hook, before the copy's work resumes.

  --remove PATH   removes a file the user's own tooling wrote to mark
                  leadership or identity (a leader marker, a node-id
                  file), so the tooling makes a fresh one. Repeatable.
                  The rule: a regular file is removed; a symbolic link is
                  removed as the link itself, never followed, so the file
                  it points to is untouched; a missing file is fine (the
                  hook may run twice); a directory or any other kind of
                  file is refused. Every PATH is checked before any is
                  removed: one refused PATH removes nothing.

Inside the command of a tenure run (TENURE_RUN_CONTROL set), it then asks
that tenure run to revoke, as kill -PWR does: the library's Revoke drops
the tenure and regenerates the holder identity, the lease is not
released at the store (it expires by its TTL, or is released by the
copy that still holds it), the command's whole tree is killed at once
(this process with it) and tenure run exits 79. The resource's fence
refuses whatever the copy writes with the old token meanwhile.

It exits 0 when done (outside a tenure run, after the removals), 64 for
a refused PATH or nothing to do, 69 when the tenure run cannot be reached,
1 when a removal fails.`,
		setup: func(fs *flag.FlagSet) action {
			var paths pathsValue
			fs.Var(&paths, "remove", "remove the leadership marker or identity file at `PATH` (repeatable; files and symbolic links only)")
			return func(_ context.Context, e *env, args []string) error {
				if len(args) != 0 {
					return usagef("revoke-inherited", "takes no arguments, got %q; give files to remove with --remove PATH", strings.Join(args, " "))
				}
				control := e.getenv(EnvControl)
				if len(paths) == 0 && control == "" {
					return usagef("revoke-inherited", "nothing to do: give --remove PATH, or run it inside the command of a tenure run (%s is not set)", EnvControl)
				}
				if err := removeInherited(e, paths); err != nil {
					return err
				}
				if control == "" {
					return nil
				}
				_, req, _ := insideRun(e, "revoke-inherited") // control is set.
				req.Op = opRevoke
				fmt.Fprintf(e.stdout, "asking tenure run to revoke lease %q: it kills this command's tree, this process included\n", req.Lease)
				rep, err := askControl(control, req)
				if err != nil {
					return &exitError{code: ExitUnavailable, err: fmt.Errorf("revoke-inherited: cannot reach the tenure run on %s: %s; if it has ended, there is nothing left to revoke", control, message(err))}
				}
				if !rep.Revoked {
					fmt.Fprintf(e.stdout, "lease %q was revoked already\n", req.Lease)
				}
				return nil
			}
		},
	}
}

// pathsValue is a repeatable flag of file paths.
type pathsValue []string

func (p *pathsValue) String() string { return strings.Join(*p, ",") }

func (p *pathsValue) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("the path is empty")
	}
	*p = append(*p, s)
	return nil
}

// removeInherited removes paths by the rule of revoke-inherited's help:
// every path is checked first, then each is removed.
func removeInherited(e *env, paths []string) error {
	present := make([]bool, len(paths))
	for i, p := range paths {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("revoke-inherited: cannot look at %s: %s; nothing was removed", p, message(err))
		case fi.IsDir():
			return usagef("revoke-inherited", "%s is a directory; --remove takes files only (name the marker files in it); nothing was removed", p)
		case !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0:
			return usagef("revoke-inherited", "%s is a %s, not a file or a symbolic link; nothing was removed", p, kindOf(fi.Mode()))
		}
		present[i] = true
	}
	for i, p := range paths {
		if !present[i] {
			fmt.Fprintf(e.stdout, "%s is absent already\n", p)
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("revoke-inherited: cannot remove %s: %s", p, message(err))
		}
		fmt.Fprintf(e.stdout, "removed %s\n", p)
	}
	return nil
}

// kindOf names a file mode's type for an error message.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
