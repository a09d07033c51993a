package cli

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

// What scripts/release stamps into a release binary with -ldflags -X:
// the tag's version, the commit and the commit's time (RFC 3339, UTC),
// all from git. Empty in any other build, which falls back to what the
// Go toolchain recorded (see [version] and [commit]).
var (
	stampedVersion string
	stampedCommit  string
	stampedTime    string
)

func versionCommand() *command {
	return &command{
		summary:  "print tenure's version",
		synopsis: "version",
		about: `Version prints the version tenure was built from, the commit and its time,
the Go version and the platform. A release binary and go install
...@VERSION report the version; a build from a source tree reports devel
with the commit, and -dirty when the tree had changes.`,
		setup: func(fs *flag.FlagSet) action {
			return func(_ context.Context, e *env, args []string) error {
				if len(args) != 0 {
					return usagef("version", "takes no arguments")
				}
				info, _ := debug.ReadBuildInfo()
				_, err := fmt.Fprintf(e.stdout, "tenure %s (%s) %s %s/%s\n", version(info), commit(info), runtime.Version(), runtime.GOOS, runtime.GOARCH)
				return err
			}
		},
	}
}

// version is the stamped version of a release binary, else the module
// version of a build (go install ...@v0.1.0), else "devel" (with the VCS
// revision when the build recorded one) for a build from a source tree.
func version(info *debug.BuildInfo) string {
	if stampedVersion != "" {
		return stampedVersion
	}
	if info == nil {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	if rev, modified, _ := vcs(info); rev != "" {
		v += "+" + short(rev)
		if modified {
			v += "-dirty"
		}
	}
	return v
}

// commit says which commit a build is of and when that commit was made:
// "commit C, T" with what scripts/release stamped, else with what the
// toolchain recorded of the source tree (-dirty when it had changes),
// else "commit unknown": a module build such as go install ...@v0.1.0
// records no commit, its version names one.
func commit(info *debug.BuildInfo) string {
	c, t := stampedCommit, stampedTime
	if c == "" && info != nil {
		var rev string
		var modified bool
		rev, modified, t = vcs(info)
		c = short(rev)
		if c != "" && modified {
			c += "-dirty"
		}
	}
	switch {
	case c == "":
		return "commit unknown"
	case t == "":
		return "commit " + c
	}
	return "commit " + c + ", " + t
}

// vcs returns what the toolchain recorded of the source tree a build was
// made in: the revision, whether the tree had changes, the commit time.
func vcs(info *debug.BuildInfo) (rev string, modified bool, t string) {
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		case "vcs.time":
			t = s.Value
		}
	}
	return rev, modified, t
}

// short is a commit hash cut to its first 12 hex digits.
func short(rev string) string {
	return rev[:min(len(rev), 12)]
}
