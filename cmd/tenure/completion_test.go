package main

import (
	"os"
	"os/exec"
	"path/filepath"
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
	__start_tenure tenure "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
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
`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script)
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
	}, got, "%s", out)
}
