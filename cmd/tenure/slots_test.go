package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
)

// slotChild prints "slot SLOT LEASE TOKEN" and waits for its standard
// input (tenure's) to close.
var slotChild = []string{"--", "sh", "-c", `echo "slot $TENURE_SLOT $TENURE_LEASE $TENURE_TOKEN"; read x || :`}

const slotLine = `^slot (\d+) (\S+) (\d+)$`

// TestRunSlots: with --slots 2, two runs of one name hold a slot each,
// with TENURE_SLOT and the slot's own lease and token; a third is refused
// with every holder named (exit 75, ended "held"), and one that waits
// takes the slot that is released, when it is released, not at its
// expiry.
func TestRunSlots(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	bothStores(t, func(t *testing.T, s store) {
		env := s.env(t)
		args := func(label string, more ...string) []string {
			a := append([]string{"run", "--name", "etl", "--slots", "2", "--ttl", ttl.String(), "--label", label}, more...)
			return append(a, slotChild...)
		}
		holders := make(map[string]*proc)
		tokens := make(map[string]int64)
		for _, label := range []string{"a", "b"} {
			p := start(t, env, args(label)...)
			m := p.stdout.await(slotLine)
			require.Equal(t, "etl#"+m[1], m[2], "TENURE_LEASE is the slot's lease")
			require.NotContains(t, holders, m[1], "two runs were given slot %s", m[1])
			holders[m[1]], tokens[m[1]] = p, atoi(t, m[3])
			require.Equal(t, "held", status(t, env, m[2]).State)
		}
		require.Len(t, holders, 2)
		st := run(t, env, "status", "--json", "--slots", "2", "etl")
		require.Equal(t, 0, st.code, st.stderr.all())
		var snap struct {
			Leases []leaseJSON `json:"leases"`
		}
		require.NoError(t, json.Unmarshal([]byte(st.stdout.rest()), &snap))
		require.Len(t, snap.Leases, 2)
		for k, l := range snap.Leases {
			require.Equal(t, fmt.Sprintf("etl#%d", k), l.Name)
			require.Equal(t, "held", l.State)
			require.Equal(t, tokens[strconv.Itoa(k)], l.Token)
		}

		out := filepath.Join(t.TempDir(), "outcome.json")
		refused := run(t, env, args("c", "--json", out)...)
		require.Equal(t, cli.ExitNotAcquired, refused.code, refused.stderr.all())
		require.Empty(t, refused.stdout.rest(), "the command ran although every slot was held")
		require.Regexp(t, `^tenure: all 2 slots of "etl" are held by the store's clock: #0 \S+ \(token \d+, \S+\), #1 \S+ \(token \d+, \S+\); not acquired`, refused.stderr.all())
		o := readOutcome(t, out)
		require.Equal(t, "held", o.Ended)
		require.Equal(t, "etl", o.Lease)
		require.Nil(t, o.Slot)

		waiter := start(t, env, args("d", "--wait", "--json", out)...)
		waiter.stderr.await(`^tenure: all 2 slots of "etl" are held .*; waiting for one$`)
		released := time.Now()
		holders["1"].closeStdin()
		require.Equal(t, 0, holders["1"].wait(), holders["1"].stderr.all())
		m := waiter.stdout.await(slotLine)
		handover := time.Since(released)
		t.Logf("%s: the waiter's command started %s after slot 1's holder ended", s.kind, handover)
		require.Less(t, handover, ttl/2, "the waiter took the slot long after its release")
		require.Equal(t, "1", m[1], "the waiter takes the slot released")
		require.Greater(t, atoi(t, m[3]), tokens["1"], "a slot's tokens grow")

		for _, p := range []*proc{waiter, holders["0"]} {
			p.closeStdin()
			require.Equal(t, 0, p.wait(), p.stderr.all())
		}
		o = readOutcome(t, out)
		require.Equal(t, "etl#1", o.Lease)
		require.NotNil(t, o.Slot)
		require.Equal(t, 1, *o.Slot)
		require.Equal(t, "released", status(t, env, "etl#1").State)

		bad := run(t, env, "run", "--name", "etl", "--slots", "257", "--", "true")
		require.Equal(t, cli.ExitUsage, bad.code, bad.stderr.all())
		require.Contains(t, bad.stderr.all(), "--slots 257: a name has 1 to 256 slots")
	})
}
