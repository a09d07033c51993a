package cli

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{
		"bash": "complete -F _tenure tenure",
		"zsh":  "#compdef tenure",
		"fish": "complete -c tenure -f -a '(__tenure_complete)'",
	} {
		o := cli(t, "completion", shell)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Empty(t, o.stderr)
		require.Contains(t, o.stdout, want, shell)
		require.Contains(t, o.stdout, "__complete", shell)
	}
}

// completions asks tenure for the candidates of the last of words, as a
// completion script does, and returns them without descriptions.
func completions(t *testing.T, words ...string) []string {
	t.Helper()
	o := cli(t, append([]string{"__complete"}, words...)...)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Empty(t, o.stderr)
	var got []string
	for line := range strings.Lines(o.stdout) {
		word, _, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		got = append(got, word)
	}
	return got
}

func TestCompleteRequest(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"status"}, completions(t, "st"))
	require.Equal(t, []string{"status"}, completions(t, "-v", "--log-format", "json", "st"))
	require.Equal(t, []string{"--name"}, completions(t, "run", "--na"))
	require.Equal(t, []string{"--wait", "--wait-timeout"}, completions(t, "run", "--wai"))
	require.Equal(t, []string{"--log-format"}, completions(t, "run", "--log"))
	require.Equal(t, []string{"json", "text"}, completions(t, "--log-format", ""))
	require.Equal(t, []string{"--log-format=json"}, completions(t, "--log-format=j"))
	require.Equal(t, []string{"--log-format=json", "--log-format=text"}, completions(t, "status", "--log-format="))
	require.Equal(t, []string{"--log-format", "-v", "--help", "--version"}, completions(t, "-"))
	require.Equal(t, []string{"fish"}, completions(t, "completion", "f"))
	require.Equal(t, []string{"reset"}, completions(t, "fence", ""))
	require.Equal(t, commandNames(), completions(t, "help", ""))
	require.Equal(t, commandNames(), completions(t))
	// Paths are the shell's to complete: run's command line, --json FILE,
	// revoke-inherited's --remove PATH, docs' DIR, also after --flag=.
	require.Equal(t, []string{":files"}, completions(t, "run", "--name", "x", "--", "ma"))
	require.Equal(t, []string{":files"}, completions(t, "run", "--name", "x", "make", "-"))
	require.Equal(t, []string{":files"}, completions(t, "run", "--json", ""))
	require.Equal(t, []string{":files"}, completions(t, "run", "--json=/tm"))
	require.Equal(t, []string{":files"}, completions(t, "revoke-inherited", "--remove", ""))
	require.Equal(t, []string{":dirs"}, completions(t, "docs", "--markdown", ""))
	// Nothing where the word is a lease name, a value without fixed
	// words, or past the words a command takes.
	require.Empty(t, completions(t, "status", ""))
	require.Empty(t, completions(t, "run", "--name", ""))
	require.Empty(t, completions(t, "run", "--store="))
	require.Empty(t, completions(t, "fence", "reset", ""))
	require.Empty(t, completions(t, "help", "docs", ""))
	require.Empty(t, completions(t, "status", "--json="))
	// Flags the dispatcher would not parse are not offered: run's
	// flags end at NAME's command, anyone's at "--", and internal ones
	// are never shown; nor are the flags of an unknown command, or of
	// a global flag Main would refuse.
	require.Empty(t, completions(t, "status", "--", "--js"))
	require.Equal(t, []string{"--json"}, completions(t, "status", "nightly", "--js"))
	require.Empty(t, completions(t, "run", "--watch"))
	require.Empty(t, completions(t, "nope", "--"))
	require.Empty(t, completions(t, "--nope", "st"))
	require.NotContains(t, completions(t, ""), "demo-worker")
	require.NotContains(t, completions(t, ""), "__complete")
	require.Empty(t, completions(t, "demo-worker", "--"))

	o := cli(t, "__complete", "st")
	require.Equal(t, ExitOK, o.code)
	require.Equal(t, "status\t"+commandTable()["status"].summary+"\n", o.stdout)
}

func TestDocsPages(t *testing.T) {
	t.Parallel()
	groff, err := exec.LookPath("groff")
	require.NoError(t, err, "the docs test reads the man pages as man does, with groff (apt-get install groff-base)")
	man, md := t.TempDir(), t.TempDir()
	o := cliEnv(t, map[string]string{"SOURCE_DATE_EPOCH": "1700000000"}, "docs", "--man", man, "--markdown", md)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Empty(t, o.stderr)
	require.Empty(t, o.stdout)

	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return string(b)
	}
	// render formats a man page as man shows it, as plain text on lines
	// long enough that nothing checked is wrapped; groff
	// warns of every roff mistake (-ww), which fails the test.
	render := func(path string) string {
		t.Helper()
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-P-cbou", "-rLL=300n", path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, stderr.String())
		require.Empty(t, stderr.String(), path)
		return string(out)
	}
	manRoot, mdRoot := render(filepath.Join(man, "tenure.1")), read(filepath.Join(md, "tenure.md"))
	for _, page := range []string{manRoot, mdRoot} {
		require.Contains(t, page, "Exit codes:")
		require.Contains(t, page, "--log-format FORMAT")
		require.Contains(t, page, "tenure [-v] [--log-format FORMAT] COMMAND [ARG...]")
	}
	require.Contains(t, manRoot, "Nov 2023")
	table := commandTable()
	pages := 0
	for _, name := range commandNames() {
		cmd := table[name]
		manPage := render(filepath.Join(man, "tenure-"+name+".1"))
		mdPage := read(filepath.Join(md, "tenure_"+name+".md"))
		pages++
		require.Contains(t, manRoot, "tenure-"+name+"(1)")
		require.Contains(t, mdRoot, "(tenure_"+name+".md)")
		require.Contains(t, manPage, "tenure-"+name+" - "+cmd.summary)
		require.Contains(t, manPage, "tenure(1)")
		require.Contains(t, mdPage, "tenure "+cmd.synopsis)
		require.Contains(t, mdPage, "(tenure.md)")
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		cmd.setup(fs)
		new(globalFlags).define(fs)
		fs.VisitAll(func(f *flag.Flag) {
			hidden := strings.HasPrefix(f.Usage, hiddenFlag)
			for page, text := range map[string]string{"man " + name: manPage, "markdown " + name: mdPage} {
				if hidden {
					require.NotContains(t, text, "--"+f.Name, page)
				} else {
					require.Contains(t, text, "--"+f.Name, page)
				}
			}
		})
	}
	for _, dir := range []string{man, md} {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, pages+1, "a page per command that is not hidden, and the overview's")
	}
	require.Contains(t, read(filepath.Join(md, "tenure_run.md")), "--store URL")
	require.Contains(t, render(filepath.Join(man, "tenure-run.1")), "--store URL")
	// Help's indented blocks keep their lines: the exit codes' table.
	require.Contains(t, manRoot, "  75     not acquired: the lease is held by someone else, or --wait-timeout\n")
	require.Contains(t, mdRoot, "      75     not acquired: the lease is held by someone else, or --wait-timeout\n")
}

func TestCompletionAndDocsUsageErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"CompletionNoShell", []string{"completion"}, "takes one shell, bash, zsh, fish; got 0 arguments"},
		{"CompletionTwoShells", []string{"completion", "bash", "zsh"}, "got 2 arguments"},
		{"CompletionUnknownShell", []string{"completion", "csh"}, `unknown shell "csh"; the shells are bash, zsh, fish`},
		{"CompletionFlag", []string{"completion", "--shell", "bash"}, "flag provided but not defined: --shell"},
		{"DocsNothing", []string{"docs"}, "give --man DIR, --markdown DIR or both"},
		{"DocsManWithoutDir", []string{"docs", "--man"}, "flag needs an argument: --man"},
		{"DocsEmptyDir", []string{"docs", "--markdown", " "}, "--markdown is empty"},
		{"DocsMissingDir", []string{"docs", "--man", missing}, "--man " + missing + ": no such directory; create it first"},
		{"DocsNotADir", []string{"docs", "--markdown", file}, "--markdown " + file + " is not a directory"},
		{"DocsOneMissing", []string{"docs", "--man", t.TempDir(), "--markdown", missing}, "no such directory"},
		{"DocsArgument", []string{"docs", missing}, "takes no arguments"},
		{"DocsBadEpoch", []string{"docs", "--man", t.TempDir()}, "SOURCE_DATE_EPOCH \"yesterday\" is not a number of seconds since 1970"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Only DocsBadEpoch gets as far as reading the epoch.
			o := cliEnv(t, map[string]string{"SOURCE_DATE_EPOCH": "yesterday"}, tc.args...)
			require.Equal(t, ExitUsage, o.code, o.stderr)
			requireOneLine(t, o)
			require.Contains(t, o.stderr, tc.want)
			require.Contains(t, o.stderr, "(see `tenure help "+tc.args[0]+"`)")
			require.Empty(t, o.stdout)
		})
	}
	require.NoDirExists(t, missing)
}

func TestPageText(t *testing.T) {
	t.Parallel()
	got := pageText("Prose that\nwraps:\n  - an item\n    continued\nMore prose.\n\n  indented\n")
	require.Equal(t, "Prose that\nwraps:\n\n      - an item\n        continued\n\nMore prose.\n\n      indented\n", got)
}

func TestRoff(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"--store URL":      `\-\-store URL`,
		`a\b`:              `a\eb`,
		"postgres://…":     `postgres://\[u2026]`,
		".TH at the start": `\&.TH at the start`,
		"'quoted":          `\&'quoted`,
		"plain":            "plain",
	} {
		require.Equal(t, want, roffLine(in), in)
	}
}
