//go:build tenure_glue_mutant

package sim_test

import (
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/internal/sim"
)

// TestGlueMutantRun runs in the build whose glue is broken on purpose (see
// internal/drive's mutant.go) and passes only when the simulation catches
// it. TestGlueMutantIsCaught builds and runs it.
func TestGlueMutantRun(t *testing.T) {
	for s := uint64(1); s <= 500; s++ {
		r := sim.Run(sim.Config{Seed: s, Strict: true})
		for _, v := range r.Violations {
			if strings.Contains(v, "two writers") {
				t.Logf("glue mutant caught at %s: %s", r, v)
				return
			}
		}
	}
	t.Fatal("the broken glue survived 500 seeds: the simulation does not exercise it")
}
