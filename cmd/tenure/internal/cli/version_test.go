package cli

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersionFromBuildInfo covers what an unstamped build reports: the
// release binaries' stamps are checked by cmd/tenure's TestReleaseBuild.
func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	rev := "0123456789abcdef0123456789abcdef01234567"
	tree := func(modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-12-07T20:00:00Z"},
			{Key: "vcs.modified", Value: modified},
		}}
	}
	for _, tc := range []struct {
		name          string
		info          *debug.BuildInfo
		version, comm string
	}{
		{"NoBuildInfo", nil, "devel", "commit unknown"},
		{"ModuleBuild", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, "v0.1.0", "commit unknown"},
		{"CleanTree", tree("false"), "devel+0123456789ab", "commit 0123456789ab, 2026-12-07T20:00:00Z"},
		{"DirtyTree", tree("true"), "devel+0123456789ab-dirty", "commit 0123456789ab-dirty, 2026-12-07T20:00:00Z"},
		{"TaggedTree", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}, Settings: tree("false").Settings}, "v0.1.0", "commit 0123456789ab, 2026-12-07T20:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.version, version(tc.info))
			require.Equal(t, tc.comm, commit(tc.info))
		})
	}
}
