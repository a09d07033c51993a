package cli

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

func versionCommand() *command {
	return &command{
		summary:  "print tenure's version",
		synopsis: "version",
		about:    "Version prints the module version tenure was built from (devel for a build from a source tree), the Go version and the platform.",
		setup: func(fs *flag.FlagSet) action {
			return func(_ context.Context, e *env, args []string) error {
				if len(args) != 0 {
					return usagef("version", "takes no arguments")
				}
				info, _ := debug.ReadBuildInfo()
				_, err := fmt.Fprintf(e.stdout, "tenure %s %s %s/%s\n", version(info), runtime.Version(), runtime.GOOS, runtime.GOARCH)
				return err
			}
		},
	}
}

// version is the module version of a build, or "devel" (with the VCS
// revision when the build recorded one) for a build from a source tree.
func version(info *debug.BuildInfo) string {
	if info == nil {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += "+" + rev
		if modified == "true" {
			v += "-dirty"
		}
	}
	return v
}
