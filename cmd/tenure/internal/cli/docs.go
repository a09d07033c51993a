package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode"
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
				if manGiven {
					date, err := manDate(e.getenv("SOURCE_DATE_EPOCH"))
					if err != nil {
						return err
					}
					info, _ := debug.ReadBuildInfo()
					source := "tenure " + version(info)
					if err := writePages(*man, "man", func(p page) (string, string) { return p.manFile(), p.man(date, source) }); err != nil {
						return err
					}
				}
				if mdGiven {
					return writePages(*markdown, "markdown", func(p page) (string, string) { return p.markdownFile(), p.markdown() })
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

// manDate is the month and year the man pages show: those of epoch, a
// SOURCE_DATE_EPOCH, or of now when it is empty.
func manDate(epoch string) (string, error) {
	t := time.Now()
	if epoch != "" {
		secs, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return "", usagef("docs", "SOURCE_DATE_EPOCH %q is not a number of seconds since 1970; set it to one, such as 1700000000, or unset it to date the man pages today", epoch)
		}
		t = time.Unix(secs, 0)
	}
	return t.UTC().Format("Jan 2006"), nil
}

// writePages writes every page into dir, rendered by render as a file
// name and its text.
func writePages(dir, kind string, render func(page) (string, string)) error {
	for _, p := range pages() {
		name, text := render(p)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return fmt.Errorf("docs: write the %s pages into %s: %w; check that the directory is writable", kind, dir, err)
		}
	}
	return nil
}

// page is one page of tenure docs: the overview's, or a command's.
type page struct {
	name     string // "tenure" or "tenure run"
	summary  string
	synopsis string
	text     string // help's text
	flags    []flagDoc
	globals  []flagDoc // the global flags, on a command's page
	related  []page    // the pages it points to (without their own)
}

// pages are the pages of tenure docs: the overview's first, then one per
// command that is not hidden, from the command table.
func pages() []page {
	globals := flag.NewFlagSet("tenure", flag.ContinueOnError)
	new(globalFlags).define(globals)
	root := page{
		name:     "tenure",
		summary:  "run a job under a lease with a fencing token",
		synopsis: "tenure [-v] [--log-format FORMAT] COMMAND [ARG...]",
		text:     overview(),
		flags:    flagDocs(globals),
	}
	table := commandTable()
	var cmds []page
	for _, name := range orderedNames() {
		cmd := table[name]
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		cmd.setup(fs)
		cmds = append(cmds, page{
			name:     "tenure " + name,
			summary:  cmd.summary,
			synopsis: "tenure " + cmd.synopsis,
			text:     cmd.about,
			flags:    flagDocs(fs),
			globals:  root.flags,
			related:  []page{root},
		})
	}
	root.related = cmds
	return append([]page{root}, cmds...)
}

func (p page) markdownFile() string { return strings.ReplaceAll(p.name, " ", "_") + ".md" }

func (p page) manFile() string { return strings.ReplaceAll(p.name, " ", "-") + ".1" }

// markdown renders the page as markdown.
func (p page) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n%s\n\n### Synopsis\n\n```\n%s\n```\n\n### Description\n\n%s", p.name, p.summary, p.synopsis, pageText(p.text))
	for _, section := range []struct {
		title string
		flags []flagDoc
	}{{"Options", p.flags}, {"Global options", p.globals}} {
		if len(section.flags) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s\n\n```\n", section.title)
		for _, d := range section.flags {
			b.WriteString(d.String())
		}
		b.WriteString("```\n")
	}
	b.WriteString("\n### See also\n\n")
	for _, r := range p.related {
		fmt.Fprintf(&b, "* [%s](%s) - %s\n", r.name, r.markdownFile(), r.summary)
	}
	return b.String()
}

// man renders the page as a man page of section 1, dated date and from
// source (the program and its version).
func (p page) man(date, source string) string {
	var b strings.Builder
	title := strings.ToUpper(strings.ReplaceAll(p.name, " ", "-"))
	// No hyphenation (HY 0): a URL or flag broken at a line's end would
	// not copy as typed.
	fmt.Fprintf(&b, ".nr HY 0\n.TH %s 1 \"%s\" \"%s\" \"tenure manual\"\n.ad l\n", roff(title), roff(date), roff(source))
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roff(strings.ReplaceAll(p.name, " ", "-")), roff(p.summary))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n\\fB%s\\fR\n", roff(p.synopsis))
	fmt.Fprintf(&b, ".SH DESCRIPTION\n%s", manText(p.text))
	for _, section := range []struct {
		title string
		flags []flagDoc
	}{{"OPTIONS", p.flags}, {`"GLOBAL OPTIONS"`, p.globals}} {
		if len(section.flags) == 0 {
			continue
		}
		fmt.Fprintf(&b, ".SH %s\n", section.title)
		for _, d := range section.flags {
			fmt.Fprintf(&b, ".TP\n\\fB\\-\\-%s\\fR", roff(d.name))
			if d.arg != "" {
				fmt.Fprintf(&b, " \\fI%s\\fR", roff(d.arg))
			}
			if d.def != "" {
				fmt.Fprintf(&b, " (default %s)", roff(d.def))
			}
			fmt.Fprintf(&b, "\n%s\n", roffLine(d.usage))
		}
	}
	b.WriteString(".SH \"SEE ALSO\"\n")
	for i, r := range p.related {
		sep := ","
		if i == len(p.related)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, ".BR %s (1)%s\n", roff(strings.ReplaceAll(r.name, " ", "-")), sep)
	}
	return b.String()
}

// block is a run of the lines of help's text: prose, or indented lines
// (lists, examples, tables) that keep their line breaks and columns.
type block struct {
	indented bool
	lines    []string
}

// blocks splits help's text at blank lines and where indentation starts
// or ends.
func blocks(text string) []block {
	var out []block
	fresh := true
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.TrimSpace(line) == "" {
			fresh = true
			continue
		}
		indented := strings.HasPrefix(line, " ")
		if fresh || out[len(out)-1].indented != indented {
			out = append(out, block{indented: indented})
		}
		out[len(out)-1].lines = append(out[len(out)-1].lines, line)
		fresh = false
	}
	return out
}

// pageText renders help's text as markdown: prose stays prose, and each
// indented block becomes a preformatted one.
func pageText(text string) string {
	var parts []string
	for _, bl := range blocks(text) {
		lines := bl.lines
		if bl.indented {
			lines = make([]string, len(bl.lines))
			for i, l := range bl.lines {
				lines[i] = "    " + l
			}
		}
		parts = append(parts, strings.Join(lines, "\n")+"\n")
	}
	return strings.Join(parts, "\n")
}

// manText renders help's text as roff paragraphs: prose is filled, and
// each indented block is an example, kept as it is.
func manText(text string) string {
	var b strings.Builder
	for i, bl := range blocks(text) {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		if bl.indented {
			b.WriteString(".EX\n")
		}
		for _, l := range bl.lines {
			b.WriteString(roffLine(l) + "\n")
		}
		if bl.indented {
			b.WriteString(".EE\n")
		}
	}
	return b.String()
}

// roff escapes s for a roff text line: backslashes print as such, every
// hyphen is a minus, so flags copied from the page work, and characters
// beyond ASCII are named (\[u2026]), as troff reads bytes.
func roff(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case r > unicode.MaxASCII:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// roffLine escapes line as roff, where a line that begins with a dot or
// an apostrophe would be a request.
func roffLine(line string) string {
	s := roff(line)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
