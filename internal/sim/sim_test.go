package sim_test

import (
	"flag"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/sim"
)

var (
	runs  = flag.Int("sim.runs", 5_000, "seeded runs per configuration in TestSeeds (two configurations: 10,000 runs by default)")
	seed  = flag.Uint64("sim.seed", 0, "replay this one seed in TestSeeds")
	trace = flag.Bool("sim.trace", false, "log every event of the runs (use with -sim.seed)")
)

func TestSeeds(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		name := "Fence"
		if strict {
			name = "StrictFenceWithClones"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			first, n := uint64(1), uint64(*runs)
			if *seed != 0 {
				first, n = *seed, 1
			}
			var total sim.Report
			for s := first; s < first+n; s++ {
				cfg := sim.Config{Seed: s, Strict: strict}
				if *trace {
					cfg.Trace = func(line string) { t.Log(line) }
				}
				r := sim.Run(cfg)
				if len(r.Violations) > 0 {
					t.Fatalf("%s\nfirst: %s\nreplay: go test ./internal/sim -run 'TestSeeds/%s' -sim.seed=%d -sim.trace", r, r.Violations[0], name, s)
				}
				total.Grants += r.Grants
				total.Accepted += r.Accepted
				total.Rejected += r.Rejected
				total.Faults += r.Faults
				total.Clones += r.Clones
			}
			t.Logf("%d runs: %d grants, %d accepted and %d rejected writes, %d faults, %d clones",
				n, total.Grants, total.Accepted, total.Rejected, total.Faults, total.Clones)
			require.Positive(t, total.Rejected, "no write was ever fenced: the faults did not bite")
			if strict {
				require.Positive(t, total.Clones)
			}
		})
	}
}

func TestEveryMutantIsCaught(t *testing.T) {
	t.Parallel()
	// Each mutant must be caught by the invariant it breaks.
	want := map[sim.Mutant]string{
		sim.NoTokenBump:         "granted after",
		sim.FenceAcceptsLower:   "stale acceptance",
		sim.DeleteOnRelease:     "granted after",
		sim.ClientClockExpiry:   "was live until",
		sim.WorkAfterRenewError: "which the store expired",
		sim.NoSeqCheck:          "two writers",
	}
	require.Len(t, want, len(sim.Mutants))
	for _, m := range sim.Mutants {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			strict := m == sim.NoSeqCheck // only clones expose a missing seq check
			for s := uint64(1); s <= 200; s++ {
				r := sim.Run(sim.Config{Seed: s, Strict: strict, Mutant: m})
				for _, v := range r.Violations {
					if strings.Contains(v, want[m]) {
						t.Logf("caught at %s: %s", r, v)
						return
					}
				}
			}
			t.Fatalf("mutant %s survived 200 seeds: the checker cannot see it", m)
		})
	}
}

func TestRunsReplayExactly(t *testing.T) {
	t.Parallel()
	for s := uint64(1); s <= 20; s++ {
		cfg := sim.Config{Seed: s, Strict: s%2 == 0}
		require.Equal(t, sim.Run(cfg), sim.Run(cfg), "seed %d", s)
	}
}

// TestGlueMutantIsCaught shows that the seeded runs exercise the glue that
// ships between the engine and the store (internal/drive): it builds this
// package with the glue broken on purpose (build tag tenure_glue_mutant:
// a renewal judged by holder and token instead of the store's
// compare-and-set) and requires the simulation to find the violation that
// break causes.
func TestGlueMutantIsCaught(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.CommandContext(t.Context(), gobin, "test", "-count=1", "-tags", "tenure_glue_mutant", "-run", "^TestGlueMutantRun$", "-v", ".")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "glue mutant caught at", "%s", out)
}
