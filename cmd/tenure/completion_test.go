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
// bash, without the bash-completion package, and drives its completion
// function as bash does on TAB: the script asks the tenure binary on PATH.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "the completion test needs bash on PATH")
	const script = `
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
	local IFS=,
	echo "$*|${COMPREPLY[*]}"
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
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		words, reply, ok := strings.Cut(line, "|")
		if !ok {
			continue // complete -p's line
		}
		got[words] = nil
		for _, r := range strings.Split(reply, ",") {
			if r != "" {
				// Several candidates come with their descriptions.
				got[words] = append(got[words], strings.Fields(r)[0])
			}
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
