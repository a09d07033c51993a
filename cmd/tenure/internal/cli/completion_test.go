package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{
		"bash": "complete -o default -F __start_tenure tenure",
		"zsh":  "#compdef tenure",
		"fish": "complete -c tenure",
	} {
		o := cli(t, "completion", shell)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Empty(t, o.stderr)
		require.Contains(t, o.stdout, want, shell)
		require.Contains(t, o.stdout, "__complete", shell)
	}
}

// complete asks tenure for the candidates of the last of words, as a
// completion script does, and returns them without descriptions.
func complete(t *testing.T, words ...string) []string {
	t.Helper()
	o := cli(t, append([]string{"__completeNoDesc"}, words...)...)
	require.Equal(t, ExitOK, o.code, o.stderr)
	lines := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
	require.Regexp(t, `^:[0-9]+$`, lines[len(lines)-1], o.stdout)
	return lines[:len(lines)-1]
}

func TestCompleteRequest(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"status"}, complete(t, "st"))
	require.Equal(t, []string{"status"}, complete(t, "-v", "--log-format", "json", "st"))
	require.Equal(t, []string{"--name"}, complete(t, "run", "--na"))
	require.Equal(t, []string{"--wait", "--wait-timeout"}, complete(t, "run", "--wai"))
	require.Equal(t, []string{"--log-format"}, complete(t, "run", "--log"))
	require.Equal(t, []string{"json", "text"}, complete(t, "--log-format", ""))
	require.Equal(t, []string{"fish"}, complete(t, "completion", "f"))
	require.Equal(t, []string{"reset"}, complete(t, "fence", ""))
	require.Equal(t, commandNames(), complete(t, "help", ""))
	// Flags the dispatcher would not parse are not offered: run's
	// flags end at NAME's command, anyone's at "--", and internal ones
	// are never shown.
	require.Empty(t, complete(t, "run", "--name", "x", "--", "make", "--na"))
	require.Empty(t, complete(t, "status", "--", "--js"))
	require.Equal(t, []string{"--json"}, complete(t, "status", "nightly", "--js"))
	require.Empty(t, complete(t, "run", "--watch"))
	require.NotContains(t, complete(t, ""), "demo-worker")
	require.NotContains(t, complete(t, ""), "__complete")

	o := cli(t, "__complete", "st")
	require.Equal(t, ExitOK, o.code)
	require.Contains(t, o.stdout, "status\t"+commandTable()["status"].summary+"\n")
}

func TestDocsPages(t *testing.T) {
	t.Parallel()
	man, md := t.TempDir(), t.TempDir()
	o := cli(t, "docs", "--man", man, "--markdown", md)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Empty(t, o.stderr)
	require.Empty(t, o.stdout)

	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return string(b)
	}
	manRoot, mdRoot := read(filepath.Join(man, "tenure.1")), read(filepath.Join(md, "tenure.md"))
	for _, page := range []string{manRoot, mdRoot} {
		require.Contains(t, page, "Exit codes:")
		require.Contains(t, page, "--log-format")
	}
	table := commandTable()
	for _, name := range commandNames() {
		cmd := table[name]
		if name == "help" {
			// Cobra gives the help command no page of its own; the
			// root's pages show its synopsis.
			require.Contains(t, manRoot, "tenure "+cmd.synopsis)
			require.Contains(t, mdRoot, "tenure "+cmd.synopsis)
			continue
		}
		manPage := read(filepath.Join(man, "tenure-"+name+".1"))
		mdPage := read(filepath.Join(md, "tenure_"+name+".md"))
		require.Contains(t, manRoot, "tenure-"+name+"(1)")
		require.Contains(t, mdRoot, "(tenure_"+name+".md)")
		require.Contains(t, manPage, cmd.summary)
		require.Contains(t, mdPage, "tenure "+cmd.synopsis)
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
	require.NoFileExists(t, filepath.Join(man, "tenure-demo-worker.1"))
	require.Contains(t, read(filepath.Join(md, "tenure_run.md")), "--store URL")
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := cli(t, tc.args...)
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
