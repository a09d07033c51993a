package registrycli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOneLineShowsNothingThatActsOnATerminal(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"agent-1":             "agent-1",
		"host a":              "host a",
		"büro":                "büro",
		"a\nb\tc\x1b[2J":      "a?b?c?[2J",
		"job\u202egnp.exe":    "job?gnp.exe",
		"jo\u200bb":           "jo?b",
		"\ufeffagent\u2066x":  "?agent?x",
		"sandbox\u2028second": "sandbox?second",
	} {
		require.Equal(t, want, oneLine(in), "%q", in)
	}
}
