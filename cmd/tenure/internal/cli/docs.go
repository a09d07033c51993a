package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra/doc"
)

func docsCommand() *command {
	return &command{
		summary:      "write the man pages or markdown pages of every command",
		synopsis:     "docs [--man DIR] [--markdown DIR]",
		interspersed: true,
		about: `Docs writes one page per command, with its synopsis, text and flags as
tenure help shows them: man pages (section 1: tenure.1, tenure-run.1, …)
into the directory of --man, markdown pages (tenure.md, tenure_run.md, …)
into the directory of --markdown. At least one of them is required. The
directory must exist; pages already in it are overwritten.

To install the man pages for yourself (man-db looks in ~/.local/share/man
when ~/.local/bin is on PATH), or to read one without installing it:
  mkdir -p ~/.local/share/man/man1 && tenure docs --man ~/.local/share/man/man1
  man -l DIR/tenure-run.1
For packaging, set SOURCE_DATE_EPOCH to date the man pages reproducibly.`,
		setup: func(fs *flag.FlagSet) action {
			man := fs.String("man", "", "write the man pages into the existing `DIR`")
			markdown := fs.String("markdown", "", "write the markdown pages into the existing `DIR`")
			return func(_ context.Context, e *env, args []string) error {
				if len(args) != 0 {
					return usagef("docs", "takes no arguments, got %q; give the directories with --man DIR or --markdown DIR", args)
				}
				manGiven, mdGiven := flagSet(fs, "man"), flagSet(fs, "markdown")
				if !manGiven && !mdGiven {
					return usagef("docs", "give --man DIR, --markdown DIR or both")
				}
				if manGiven {
					if err := checkDir("man", *man); err != nil {
						return err
					}
				}
				if mdGiven {
					if err := checkDir("markdown", *markdown); err != nil {
						return err
					}
				}
				root := commandTree()
				if manGiven {
					info, _ := debug.ReadBuildInfo()
					header := &doc.GenManHeader{Title: "TENURE", Section: "1", Source: "tenure " + version(info), Manual: "tenure manual"}
					if err := doc.GenManTree(root, header, *man); err != nil {
						return fmt.Errorf("docs: write the man pages into %s: %w", *man, err)
					}
				}
				if mdGiven {
					if err := doc.GenMarkdownTree(root, *markdown); err != nil {
						return fmt.Errorf("docs: write the markdown pages into %s: %w", *markdown, err)
					}
				}
				return nil
			}
		},
	}
}

// checkDir refuses the value of the flag --name unless it names an
// existing directory: docs creates pages, not directories, so a mistyped
// path writes nothing.
func checkDir(name, dir string) error {
	if strings.TrimSpace(dir) == "" {
		return usagef("docs", "--%s is empty; give the directory to write the pages into", name)
	}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usagef("docs", "--%s %s: no such directory; create it first (mkdir -p %s)", name, dir, dir)
	case err != nil:
		return usagef("docs", "--%s %s: %v", name, dir, err)
	case !info.IsDir():
		return usagef("docs", "--%s %s is not a directory; give the directory to write the pages into", name, dir)
	}
	return nil
}
