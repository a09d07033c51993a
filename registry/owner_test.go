package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/registry"
)

func TestOwnerThreeOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	ctx := ctxT(t)
	g := b.register(t, "host-a")

	_, err := b.reg.Owner(ctx, "sandbox")
	require.ErrorIs(t, err, registry.ErrNoOwner)
	require.NotErrorIs(t, err, registry.ErrOwnerDead)

	placed, err := b.reg.Place(ctx, "sandbox", registry.PlaceParams{Metadata: json.RawMessage(`{"image": "debian"}`)})
	require.NoError(t, err)
	require.True(t, placed.Placed)
	require.Equal(t, "host-a", placed.Agent.ID)
	require.JSONEq(t, `{"image": "debian"}`, string(placed.Metadata))

	own, err := b.reg.Owner(ctx, "sandbox")
	require.NoError(t, err)
	require.Equal(t, "host-a", own.Agent.ID)
	require.True(t, own.Agent.Alive)
	require.False(t, own.Placed)
	require.Equal(t, placed.CreatedAt, own.CreatedAt)

	b.age(t, "host-a", stale)
	_, err = b.reg.Owner(ctx, "sandbox")
	var dead *registry.OwnerDeadError
	require.ErrorAs(t, err, &dead)
	require.NotErrorIs(t, err, registry.ErrNoOwner)
	require.Equal(t, "sandbox", dead.Resource)
	require.Equal(t, "host-a", dead.Agent)
	require.GreaterOrEqual(t, dead.Age, stale)
	require.False(t, dead.Deregistered)
	a, err := b.reg.Agent(ctx, "host-a")
	require.NoError(t, err)
	require.Equal(t, a.LastHeartbeat, dead.LastHeartbeat, "the store's last heartbeat, not a local time")

	beat, err := b.reg.Heartbeat(ctx, g)
	require.NoError(t, err)
	_, err = b.reg.Owner(ctx, "sandbox")
	require.NoError(t, err, "the owner is alive again with its next heartbeat")

	require.NoError(t, b.reg.Deregister(ctx, beat.Registration))
	_, err = b.reg.Owner(ctx, "sandbox")
	require.ErrorAs(t, err, &dead)
	require.True(t, dead.Deregistered)
	require.Contains(t, err.Error(), "deregistered")
}

// registerAndPlace registers agent, which must be the only live one, and
// places resource, which must land on it.
func (b *bundle) registerAndPlace(t *testing.T, agent, resource string) registry.Ownership {
	t.Helper()
	b.register(t, agent)
	own, err := b.reg.Place(ctxT(t), resource, registry.PlaceParams{})
	require.NoError(t, err)
	require.Equal(t, agent, own.Agent.ID)
	return own
}

// naiveOwner is the seed's lookup, kept here to show its bug: it joins the
// ownership with the live agents only, so an ownership whose agent is dead
// reads as no ownership at all.
func naiveOwner(ctx context.Context, b *bundle, resource string) (string, bool, error) {
	var agent string
	err := b.pool.QueryRow(ctx, `SELECT o.agent_id FROM `+b.table("owners")+` AS o
		JOIN `+b.table("agents")+` AS a ON a.id = o.agent_id
		WHERE o.resource = $1 AND NOT a.deregistered
		  AND a.heartbeat_at + a.stale_after_us * interval '1 microsecond' > clock_timestamp()`, resource).Scan(&agent)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return agent, err == nil, err
}

// TestSeedBugDeadOwnerIsNotNoOwner reproduces the seed's first bug with the
// naive lookup and shows that Owner and Place do not have it.
func TestSeedBugDeadOwnerIsNotNoOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	ctx := ctxT(t)
	b.registerAndPlace(t, "host-a", "db-on-local-volume") // asserts it lands on host-a
	b.register(t, "host-b")

	b.age(t, "host-a", stale) // host-a dies; its volume still holds the data

	// Reproduced: the naive lookup says "no owner", and a placer trusting it
	// would put a second, empty copy on host-b.
	_, found, err := naiveOwner(ctx, b, "db-on-local-volume")
	require.NoError(t, err)
	require.False(t, found, "the naive lookup reports a dead owner as no owner (the seed's bug)")

	// Prevented: the dead owner is its own answer ...
	_, err = b.reg.Owner(ctx, "db-on-local-volume")
	var dead *registry.OwnerDeadError
	require.ErrorAs(t, err, &dead)
	require.Equal(t, "host-a", dead.Agent)
	require.False(t, dead.LastHeartbeat.IsZero())
	require.Contains(t, err.Error(), "do not place it elsewhere")

	// ... and Place does not turn it into a new placement, whatever the
	// policy would choose.
	anywhereElse := func(string, []registry.Agent) (string, error) { return "host-b", nil }
	_, err = b.reg.Place(ctx, "db-on-local-volume", registry.PlaceParams{Policy: anywhereElse})
	require.ErrorAs(t, err, &dead)
	require.Equal(t, "host-a", dead.Agent)
	require.Equal(t, 1, b.count(t, "owners"))
	hostB, err := b.reg.Agent(ctx, "host-b")
	require.NoError(t, err)
	require.Zero(t, hostB.Owned)

	// Even an agent row that vanished (the foreign key forbids it; an
	// operator may drop it) stays a dead owner, never "no owner".
	_, err = b.pool.Exec(ctx, "ALTER TABLE "+b.table("owners")+" DROP CONSTRAINT r_owners_agent_id_fkey")
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "DELETE FROM "+b.table("agents")+" WHERE id = 'host-a'")
	require.NoError(t, err)
	_, err = b.reg.Owner(ctx, "db-on-local-volume")
	require.ErrorAs(t, err, &dead)
	require.True(t, dead.LastHeartbeat.IsZero())
	require.Contains(t, err.Error(), "not registered at all")
	_, err = b.reg.Place(ctx, "db-on-local-volume", registry.PlaceParams{Policy: anywhereElse})
	require.ErrorIs(t, err, registry.ErrOwnerDead)
}

func TestAgentRowCannotVanishUnderOwnership(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	ctx := ctxT(t)
	b.registerAndPlace(t, "host-a", "r")
	_, err := b.pool.Exec(ctx, "DELETE FROM "+b.table("agents")+" WHERE id = 'host-a'")
	require.ErrorContains(t, err, "violates foreign key constraint")
}

func TestReassign(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	b := setup(t, registry.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	ctx := ctxT(t)
	b.registerAndPlace(t, "host-a", "sandbox")
	b.register(t, "host-b")
	b.register(t, "host-c")
	b.age(t, "host-a", stale)
	b.age(t, "host-c", stale)

	move := registry.ReassignParams{Resource: "sandbox", From: "host-a", To: "host-b", Reason: "host-a lost its disk (ticket 1234)"}

	refused := []struct {
		name   string
		edit   func(p *registry.ReassignParams)
		target error
	}{
		{"NoReason", func(p *registry.ReassignParams) { p.Reason = "" }, store.ErrInvalid},
		{"ToItself", func(p *registry.ReassignParams) { p.To = "host-a" }, store.ErrInvalid},
		{"StaleFrom", func(p *registry.ReassignParams) { p.From = "host-b"; p.To = "host-a" }, registry.ErrOwnerChanged},
		{"DeadTarget", func(p *registry.ReassignParams) { p.To = "host-c" }, registry.ErrAgentDead},
		{"UnknownTarget", func(p *registry.ReassignParams) { p.To = "host-z" }, registry.ErrUnknownAgent},
		{"NoOwner", func(p *registry.ReassignParams) { p.Resource = "nothing" }, registry.ErrNoOwner},
	}
	for _, tt := range refused {
		p := move
		tt.edit(&p)
		_, err := b.reg.Reassign(ctx, p)
		require.ErrorIs(t, err, tt.target, tt.name)
	}
	require.Zero(t, b.count(t, "reassignments"), "refused reassignments record nothing")
	require.Empty(t, logs.String())

	own, err := b.reg.Reassign(ctx, move)
	require.NoError(t, err)
	require.Equal(t, "host-b", own.Agent.ID)
	require.True(t, own.Agent.Alive)
	own, err = b.reg.Owner(ctx, "sandbox")
	require.NoError(t, err)
	require.Equal(t, "host-b", own.Agent.ID)

	history, err := b.reg.Reassignments(ctx, "sandbox")
	require.NoError(t, err)
	require.Len(t, history, 1)
	require.Equal(t, "host-a", history[0].From)
	require.Equal(t, "host-b", history[0].To)
	require.Equal(t, move.Reason, history[0].Reason)
	require.False(t, history[0].FromAlive)
	require.False(t, history[0].FromLastHeartbeat.IsZero())
	require.Contains(t, logs.String(), `"reason":"host-a lost its disk (ticket 1234)"`)
	require.Contains(t, logs.String(), `"msg":"registry: resource reassigned"`)

	_, err = b.reg.Reassign(ctx, move)
	require.ErrorIs(t, err, registry.ErrOwnerChanged, "a second operator acting on the same view is refused")
}

func TestRemove(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	ctx := ctxT(t)
	b.registerAndPlace(t, "host-a", "sandbox")

	require.ErrorIs(t, b.reg.Remove(ctx, registry.RemoveParams{Resource: "sandbox", Agent: "host-a"}), store.ErrInvalid)
	require.ErrorIs(t, b.reg.Remove(ctx, registry.RemoveParams{Resource: "sandbox", Agent: "host-b", Reason: "deleted"}), registry.ErrOwnerChanged)
	require.ErrorIs(t, b.reg.Remove(ctx, registry.RemoveParams{Resource: "other", Agent: "host-a", Reason: "deleted"}), registry.ErrNoOwner)
	require.NoError(t, b.reg.Remove(ctx, registry.RemoveParams{Resource: "sandbox", Agent: "host-a", Reason: "sandbox deleted by its user"}))

	_, err := b.reg.Owner(ctx, "sandbox")
	require.ErrorIs(t, err, registry.ErrNoOwner)
	history, err := b.reg.Reassignments(ctx, "sandbox")
	require.NoError(t, err)
	require.Len(t, history, 1)
	require.Empty(t, history[0].To)
	require.True(t, history[0].FromAlive)
	require.Equal(t, "sandbox deleted by its user", history[0].Reason)
}

// TestBadInput: every refused call says why, matches store.ErrInvalid and
// writes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	ctx := ctxT(t)
	valid := registry.RegisterParams{ID: "host", Address: "a:1"}
	manyLabels := map[string]string{}
	for _, id := range ids("k", registry.MaxLabels+1) {
		manyLabels[id] = "v"
	}
	register := func(edit func(p *registry.RegisterParams)) func() error {
		return func() error {
			p := valid
			edit(&p)
			_, err := b.reg.Register(ctx, p)
			return err
		}
	}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"EmptyAgentID", register(func(p *registry.RegisterParams) { p.ID = "" }), "agent id is empty"},
		{"LongAgentID", register(func(p *registry.RegisterParams) { p.ID = strings.Repeat("h", registry.MaxAgentIDLen+1) }), "agent id is 256 bytes long"},
		{"ControlInAgentID", register(func(p *registry.RegisterParams) { p.ID = "host\n" }), "control character"},
		{"EmptyAddress", register(func(p *registry.RegisterParams) { p.Address = "" }), "agent address is empty"},
		{"TooManyLabels", register(func(p *registry.RegisterParams) { p.Labels = manyLabels }), "65 labels; the maximum is 64"},
		{"LongLabelValue", register(func(p *registry.RegisterParams) {
			p.Labels = map[string]string{"zone": strings.Repeat("z", registry.MaxLabelValueLen+1)}
		}), `value of label "zone" is 256 bytes long`},
		{"LongLabelKey", register(func(p *registry.RegisterParams) {
			p.Labels = map[string]string{strings.Repeat("k", registry.MaxLabelKeyLen+1): "v"}
		}), "is 64 bytes long; the maximum is 63"},
		{"BadLabelKey", register(func(p *registry.RegisterParams) { p.Labels = map[string]string{"a b": "v"} }), "use ASCII letters"},
		{"EmptyLabelKey", register(func(p *registry.RegisterParams) { p.Labels = map[string]string{"": "v"} }), "label key is empty"},
		{"CapacityNotJSON", register(func(p *registry.RegisterParams) { p.Capacity = json.RawMessage(`{cpu: 1}`) }), "capacity is not valid JSON"},
		{"CapacityTooBig", register(func(p *registry.RegisterParams) {
			p.Capacity = json.RawMessage(`"` + strings.Repeat("x", registry.MaxJSONLen) + `"`)
		}), "capacity is 16386 bytes long"},
		{"CapacityNUL", register(func(p *registry.RegisterParams) { p.Capacity = json.RawMessage(`{"a": "\u0000"}`) }), "U+0000"},
		{"LongInstance", register(func(p *registry.RegisterParams) { p.Instance = strings.Repeat("i", 65) }), "agent instance is 65 bytes long"},
		{"HeartbeatZeroRegistration", func() error { _, err := b.reg.Heartbeat(ctx, registry.Registration{}); return err }, "agent id is empty"},
		{"HeartbeatZeroSeq", func() error {
			_, err := b.reg.Heartbeat(ctx, registry.Registration{ID: "host", Instance: "i"})
			return err
		}, "seq 0 of agent \"host\" must be positive"},
		{"DeregisterZeroRegistration", func() error { return b.reg.Deregister(ctx, registry.Registration{}) }, "agent id is empty"},
		{"PlaceEmptyResource", func() error { _, err := b.reg.Place(ctx, "", registry.PlaceParams{}); return err }, "resource id is empty"},
		{"PlaceLongResource", func() error {
			_, err := b.reg.Place(ctx, strings.Repeat("r", registry.MaxResourceLen+1), registry.PlaceParams{})
			return err
		}, "resource id is 256 bytes long"},
		{"PlaceBadMetadata", func() error {
			_, err := b.reg.Place(ctx, "r", registry.PlaceParams{Metadata: json.RawMessage(`[`)})
			return err
		}, "metadata is not valid JSON"},
		{"OwnerEmptyResource", func() error { _, err := b.reg.Owner(ctx, ""); return err }, "resource id is empty"},
		{"AgentEmptyID", func() error { _, err := b.reg.Agent(ctx, ""); return err }, "agent id is empty"},
		{"ReassignEmpty", func() error { _, err := b.reg.Reassign(ctx, registry.ReassignParams{}); return err }, "resource id is empty"},
		{"ReassignNoReason", func() error {
			_, err := b.reg.Reassign(ctx, registry.ReassignParams{Resource: "r", From: "a", To: "b"})
			return err
		}, "reassign reason is empty"},
		{"ReassignLongReason", func() error {
			_, err := b.reg.Reassign(ctx, registry.ReassignParams{Resource: "r", From: "a", To: "b", Reason: strings.Repeat("w", registry.MaxReasonLen+1)})
			return err
		}, "reassign reason is 1025 bytes long"},
		{"RemoveNoReason", func() error { return b.reg.Remove(ctx, registry.RemoveParams{Resource: "r", Agent: "a"}) }, "remove reason is empty"},
		{"ReassignmentsEmpty", func() error { _, err := b.reg.Reassignments(ctx, ""); return err }, "resource id is empty"},
		{"NegativeInterval", func() error {
			_, err := registry.New(b.pool, registry.Config{HeartbeatInterval: -time.Second})
			return err
		}, "HeartbeatInterval (-1s) must be positive"},
		{"StaleBelowTwiceInterval", func() error {
			_, err := registry.New(b.pool, registry.Config{HeartbeatInterval: 10 * time.Second, StaleAfter: 15 * time.Second})
			return err
		}, "StaleAfter (15s) must be at least 2 × HeartbeatInterval (20s)"},
		{"NegativeCacheTTL", func() error { _, err := registry.NewCache(b.reg, registry.CacheConfig{TTL: -time.Second}); return err }, "cache TTL (-1s) must be positive"},
		{"HeartbeaterZeroRegistration", func() error {
			_, err := registry.NewHeartbeater(b.reg, registry.Registration{}, registry.HeartbeaterConfig{})
			return err
		}, "agent id is empty"},
		{"HeartbeaterForgedTimings", func() error {
			_, err := registry.NewHeartbeater(b.reg, registry.Registration{ID: "h", Instance: "i", Seq: 1}, registry.HeartbeaterConfig{})
			return err
		}, "use the Registration that Register returned"},
	}
	for _, tt := range tests {
		err := tt.call()
		require.ErrorIs(t, err, store.ErrInvalid, tt.name)
		require.ErrorContains(t, err, tt.want, tt.name)
		require.True(t, strings.HasPrefix(err.Error(), "registry: "), "%s: %s", tt.name, err)
	}
	require.Zero(t, b.count(t, "agents"))
	require.Zero(t, b.count(t, "owners"))
	require.Zero(t, b.count(t, "reassignments"))
}
