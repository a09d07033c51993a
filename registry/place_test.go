package registry_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/registry"
)

func TestPlace(t *testing.T) {
	t.Parallel()

	t.Run("NoLiveAgents", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		_, err := b.reg.Place(ctx, "r", registry.PlaceParams{})
		require.ErrorIs(t, err, registry.ErrNoAgents)
		b.register(t, "host-a")
		b.age(t, "host-a", stale)
		_, err = b.reg.Place(ctx, "r", registry.PlaceParams{})
		require.ErrorIs(t, err, registry.ErrNoAgents)
		require.Zero(t, b.count(t, "owners"))
	})

	t.Run("LeastOwnedSpreadsAndOnlyLive", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		for _, id := range []string{"a", "b", "c"} {
			b.register(t, id)
		}
		b.age(t, "c", stale)
		for _, r := range ids("res", 10) {
			own, err := b.reg.Place(ctx, r, registry.PlaceParams{})
			require.NoError(t, err)
			require.True(t, own.Placed)
			require.NotEqual(t, "c", own.Agent.ID, "a stale agent is never chosen")
		}
		agents, err := b.reg.Agents(ctx)
		require.NoError(t, err)
		require.Equal(t, []int64{5, 5, 0}, []int64{agents[0].Owned, agents[1].Owned, agents[2].Owned})
	})

	t.Run("ExistingOwnerIsReturned", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		b.register(t, "a")
		first, err := b.reg.Place(ctx, "r", registry.PlaceParams{Metadata: []byte(`{"v": 1}`)})
		require.NoError(t, err)
		b.register(t, "b")
		again, err := b.reg.Place(ctx, "r", registry.PlaceParams{
			Policy:   func(string, []registry.Agent) (string, error) { return "b", nil },
			Metadata: []byte(`{"v": 2}`),
		})
		require.NoError(t, err)
		require.False(t, again.Placed)
		require.Equal(t, "a", again.Agent.ID)
		require.JSONEq(t, `{"v": 1}`, string(again.Metadata))
		require.Equal(t, first.CreatedAt, again.CreatedAt)
	})

	t.Run("PolicyErrors", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		b.register(t, "a")
		b.register(t, "dead")
		b.age(t, "dead", stale)
		var seen []string
		_, err := b.reg.Place(ctx, "r", registry.PlaceParams{Policy: func(_ string, c []registry.Agent) (string, error) {
			for _, a := range c {
				seen = append(seen, a.ID)
			}
			return "dead", nil
		}})
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, `the policy chose "dead", which is not one of the 1 live candidates`)
		require.Equal(t, []string{"a"}, seen)

		errFull := errors.New("every host is full")
		_, err = b.reg.Place(ctx, "r", registry.PlaceParams{Policy: func(string, []registry.Agent) (string, error) { return "", errFull }})
		require.ErrorIs(t, err, errFull)
		require.Zero(t, b.count(t, "owners"))
	})
}

// randomPolicy chooses any live agent, so racing placers disagree as much
// as they can.
func randomPolicy(_ string, candidates []registry.Agent) (string, error) {
	return candidates[rand.IntN(len(candidates))].ID, nil
}

func TestPlaceConcurrentGoroutines(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	ctx := ctxT(t)
	for _, id := range ids("host", 5) {
		b.register(t, id)
	}
	resources := ids("res", 20)
	const placers = 12
	type answer struct {
		resource, agent string
		placed          bool
	}
	answers := make(chan answer, placers*len(resources))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range placers {
		wg.Go(func() {
			<-start
			for _, r := range resources {
				own, err := b.reg.Place(ctx, r, registry.PlaceParams{Policy: randomPolicy})
				if err != nil {
					t.Errorf("place %s: %v", r, err)
					return
				}
				answers <- answer{r, own.Agent.ID, own.Placed}
			}
		})
	}
	close(start)
	wg.Wait()
	close(answers)

	owner := map[string]string{}
	placed := map[string]int{}
	for a := range answers {
		if prev, ok := owner[a.resource]; ok {
			require.Equal(t, prev, a.agent, "concurrent placements of %s disagree", a.resource)
		}
		owner[a.resource] = a.agent
		if a.placed {
			placed[a.resource]++
		}
	}
	require.Len(t, owner, len(resources))
	for _, r := range resources {
		require.Equal(t, 1, placed[r], "exactly one Place call created %s", r)
	}
	requireOwners(t, b, owner)
}

// requireOwners checks the owners table holds exactly want.
func requireOwners(t *testing.T, b *bundle, want map[string]string) {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), "SELECT resource, agent_id FROM "+b.table("owners"))
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var x [2]string
		return x, r.Scan(&x[0], &x[1])
	})
	require.NoError(t, err)
	gotMap := map[string]string{}
	for _, x := range got {
		gotMap[x[0]] = x[1]
	}
	require.Equal(t, want, gotMap)
}

// Environment of a child process of TestPlaceConcurrentProcesses.
const (
	envChild     = "TENURE_REGISTRY_PLACE_CHILD"
	envSchema    = "TENURE_REGISTRY_PLACE_SCHEMA"
	envResources = "TENURE_REGISTRY_PLACE_RESOURCES"
)

// TestPlaceConcurrentProcesses races Place for the same resources from
// several OS processes (this test binary, run again), each with several
// goroutines: every resource gets one owner and every process is told the
// same one.
func TestPlaceConcurrentProcesses(t *testing.T) {
	if os.Getenv(envChild) != "" {
		placeChild(t)
		return
	}
	t.Parallel()
	b := setup(t, registry.Config{})
	for _, id := range ids("host", 5) {
		b.register(t, id)
	}
	resources := ids("res", 15)
	const procs = 4

	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Scanner
		lines []string
	}
	children := make([]*child, procs)
	for i := range children {
		cmd := exec.CommandContext(ctxT(t), os.Args[0], "-test.run=^TestPlaceConcurrentProcesses$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), envChild+"=1", envSchema+"="+b.cfg.Schema, envResources+"="+strings.Join(resources, ","))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		children[i] = &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	}
	// Wait until every child is connected and ready, then start them all.
	for i, c := range children {
		ready := false
		for c.out.Scan() {
			if c.out.Text() == "ready" {
				ready = true
				break
			}
		}
		require.True(t, ready, "child %d never became ready", i)
	}
	for _, c := range children {
		_, err := io.WriteString(c.stdin, "go\n")
		require.NoError(t, err)
		require.NoError(t, c.stdin.Close())
	}
	for _, c := range children {
		for c.out.Scan() {
			c.lines = append(c.lines, c.out.Text())
		}
		require.NoError(t, c.cmd.Wait(), "child output:\n%s", strings.Join(c.lines, "\n"))
	}

	owner := map[string]string{}
	placed := map[string]int{}
	answers := 0
	for _, c := range children {
		for _, line := range c.lines {
			var r, agent string
			var created bool
			if n, _ := fmt.Sscanf(line, "placed %s %s %t", &r, &agent, &created); n != 3 {
				continue
			}
			answers++
			if prev, ok := owner[r]; ok {
				require.Equal(t, prev, agent, "processes disagree on the owner of %s", r)
			}
			owner[r] = agent
			if created {
				placed[r]++
			}
		}
	}
	require.Equal(t, procs*placeChildGoroutines*len(resources), answers)
	for _, r := range resources {
		require.Equal(t, 1, placed[r], "exactly one Place call, in one process, created %s", r)
	}
	requireOwners(t, b, owner)
}

const placeChildGoroutines = 4

// placeChild is the child side of TestPlaceConcurrentProcesses: it waits for
// "go" on stdin, places every resource from several goroutines and prints
// "placed RESOURCE AGENT CREATED" per answer.
func placeChild(t *testing.T) {
	pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	reg, err := registry.New(pool, registry.Config{Schema: os.Getenv(envSchema), TablePrefix: testPrefix})
	require.NoError(t, err)
	resources := strings.Split(os.Getenv(envResources), ",")
	ctx := ctxT(t)
	// Warm the pool so that the race starts with connections open.
	_, err = reg.Agents(ctx)
	require.NoError(t, err)
	fmt.Println("ready")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "go\n", line)

	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out []string
	)
	for range placeChildGoroutines {
		wg.Go(func() {
			for _, r := range resources {
				own, err := reg.Place(ctx, r, registry.PlaceParams{Policy: randomPolicy})
				if err != nil {
					t.Errorf("place %s: %v", r, err)
					return
				}
				mu.Lock()
				out = append(out, fmt.Sprintf("placed %s %s %t", r, own.Agent.ID, own.Placed))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Println(strings.Join(out, "\n"))
}
