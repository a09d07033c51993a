package main

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBashCompletion loads tenure's bash completion script into a real
// bash and drives its completion function as bash does on TAB: the script
// asks the tenure binary on PATH. The script needs the bash-completion
// package (scripts/test installs Debian's), as it does on users' machines.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "the completion test needs bash on PATH")
	const lib = "/usr/share/bash-completion/bash_completion"
	_, err = os.Stat(lib)
	require.NoError(t, err, "the completion test needs the bash-completion package (apt-get install bash-completion)")
	const script = `
source ` + lib + ` || exit 1
source <(tenure completion bash) || exit 1
complete -p tenure || exit 1
comp() {
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	COMP_LINE="$*"
	COMP_POINT=${#COMP_LINE}
	COMP_TYPE=9
	COMPREPLY=()
	_tenure tenure "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
	echo "$*|"
	local r
	for r in "${COMPREPLY[@]}"; do
		echo "$*|$r"
	done
}
comp tenure st
comp tenure -v --log-format json rel
comp tenure run --na
comp tenure run --wait-t
comp tenure run --wai
comp tenure status nightly --js
comp tenure --log-format j
comp tenure completion f
comp tenure help docs ''
comp tenure run --name x -- make --na
comp tenure run --json o
comp tenure run --json=o
comp tenure docs --man ''
`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script)
	cmd.Dir = completionDir(t)
	cmd.Env = testEnv(t, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "COLUMNS=200")
	// Standard error has compopt's complaints: bash is not completing.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s%s", out, stderr.String())
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		words, reply, ok := strings.Cut(line, "|")
		if !ok {
			continue // complete -p's line
		}
		if _, seen := got[words]; !seen {
			got[words] = nil
		}
		if reply != "" {
			// Several candidates come with their descriptions.
			got[words] = append(got[words], strings.Fields(reply)[0])
		}
	}
	require.Equal(t, map[string][]string{
		"tenure st":                        {"status"},
		"tenure -v --log-format json rel":  {"release"},
		"tenure run --na":                  {"--name"},
		"tenure run --wait-t":              {"--wait-timeout"},
		"tenure run --wai":                 {"--wait", "--wait-timeout"},
		"tenure status nightly --js":       {"--json"},
		"tenure --log-format j":            {"json"},
		"tenure completion f":              {"fish"},
		"tenure help docs ":                nil,
		"tenure run --name x -- make --na": nil,
		"tenure run --json o":              {"out.json"},
		"tenure run --json=o":              {"out.json"},
		"tenure docs --man ":               {"pages"},
	}, got, "%s", out)
}

// completionDir makes the directory the completion tests type in: a file
// out.json and a directory pages.
func completionDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "out.json"), nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "pages"), 0o755))
	return dir
}

// TestZshCompletion loads tenure's zsh completion script into a real
// interactive zsh, on a terminal zsh's zpty makes, and types each line and
// TAB there. TAB is bound to completion that inserts every candidate, and
// ^X prints the line, so the test reads what zsh would offer.
func TestZshCompletion(t *testing.T) {
	t.Parallel()
	zsh, err := exec.LookPath("zsh")
	require.NoError(t, err, "the completion test needs zsh on PATH (apt-get install zsh)")
	// Each line is typed, then TAB and ^X; the line printed between << and
	// >> is read back. The printing widget writes its brackets escaped, so
	// the terminal's echo of its definition does not match.
	const script = `
zmodload zsh/zpty || exit 1
zpty -b z 'zsh -f -i'
zpty -w z 'PS1= RPS1=; autoload -Uz compinit && compinit -u -D && source <(tenure completion zsh) || exit 1'
zpty -w z '_all() { _main_complete; compstate[insert]=all; compstate[list]= }; zle -C all complete-word _all; bindkey "^I" all'
zpty -w z 'dump() { print -r -- $'"'\x3c\x3c'"'"$BUFFER"$'"'\x3e\x3e'"'; BUFFER= }; zle -N dump; bindkey "^X" dump'
for line in "$@"; do
	zpty -w -n z "$line"$'\t\x18'
	zpty -r -m z out '*<<*>>*' || exit 1
	print -r -- "$line|${${out##*<<}%%>>*}"
done
zpty -d z
`
	want := map[string][]string{
		"tenure st":                        {"tenure status "},
		"tenure -v --log-format json rel":  {"tenure -v --log-format json release "},
		"tenure run --wai":                 {"tenure run --wait --wait-timeout "},
		"tenure status nightly --js":       {"tenure status nightly --json "},
		"tenure --log-format=j":            {"tenure --log-format=json "},
		"tenure completion f":              {"tenure completion fish "},
		"tenure help docs ":                {"tenure help docs "},
		"tenure run --name x -- make --na": {"tenure run --name x -- make --na"},
		"tenure run --json o":              {"tenure run --json out.json "},
		"tenure run --json=o":              {"tenure run --json=out.json "},
		"tenure docs --man ":               {"tenure docs --man pages/"},
	}
	require.Equal(t, want, typeLines(t, want, zsh, "-f", "-c", script, "zsh"))
}

// TestFishCompletion loads tenure's fish completion script into a real
// fish and asks it what it completes each line with (complete -C), as
// fish does on TAB.
func TestFishCompletion(t *testing.T) {
	t.Parallel()
	fish, err := exec.LookPath("fish")
	require.NoError(t, err, "the completion test needs fish on PATH (apt-get install fish)")
	const script = `
tenure completion fish | source; or exit 1
for line in $argv
	for c in (complete -C"$line")
		echo "$line|$c"
	end
	echo "$line|"
end
`
	want := map[string][]string{
		"tenure st":                        {"status"},
		"tenure -v --log-format json rel":  {"release"},
		"tenure run --wai":                 {"--wait", "--wait-timeout"},
		"tenure status nightly --js":       {"--json"},
		"tenure --log-format=j":            {"--log-format=json"},
		"tenure completion f":              {"fish"},
		"tenure help docs ":                nil,
		"tenure run --name x -- make --na": nil,
		"tenure run --json o":              {"out.json"},
		"tenure run --json=o":              {"--json=out.json"},
		"tenure docs --man ":               {"pages/"},
	}
	require.Equal(t, want, typeLines(t, want, fish, "--no-config", "-c", script))
}

// typeLines runs shell with args and then the lines to type, the keys
// of want, in a directory of completionDir, with the tenure binary on
// PATH. It returns what the shell printed for each typed line: the words
// of its lines "TYPED|RESULT", without what follows a tab (a
// description); a line "TYPED|" alone says the result is empty.
func typeLines(t *testing.T, want map[string][]string, shell string, args ...string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, append(args, slices.Sorted(maps.Keys(want))...)...)
	cmd.Dir = completionDir(t)
	cmd.Env = testEnv(t, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, ctx.Err(), "%s did not answer in time\n%s%s", shell, out, stderr.String())
	require.NoError(t, err, "%s%s", out, stderr.String())
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		typed, result, ok := strings.Cut(line, "|")
		require.True(t, ok, "a line without |: %q", line)
		if _, seen := got[typed]; !seen {
			got[typed] = nil
		}
		if word, _, _ := strings.Cut(result, "\t"); word != "" {
			got[typed] = append(got[typed], word)
		}
	}
	return got
}
