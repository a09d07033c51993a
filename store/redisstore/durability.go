package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/redis/go-redis/v9"
)

// Risk is one server setting under which Redis can lose writes it has
// acknowledged, or drop the store's keys, as [Store.CheckDurability]
// found it.
type Risk struct {
	// Setting names what was read: a CONFIG parameter ("appendonly",
	// "appendfsync", "maxmemory-policy") or an INFO field ("role",
	// "connected_slaves").
	Setting string
	// Value is the setting's value on the server.
	Value string
	// Effect says what can be lost, and what that costs the store and a
	// fence kept on the same server.
	Effect string
}

// String returns "Setting=Value: Effect".
func (r Risk) String() string { return r.Setting + "=" + r.Value + ": " + r.Effect }

// configReader is what [Store.CheckDurability] needs of the client beyond
// [Client]: CONFIG GET and INFO. A *redis.Client has both.
type configReader interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
	Info(ctx context.Context, sections ...string) *redis.StringCmd
}

// CheckDurability asks the server (CONFIG GET and INFO replication, two
// round trips) for the settings under which it can lose acknowledged
// writes or the store's keys, and returns one [Risk] for each it finds,
// none when the server syncs every write to disk before answering
// (appendonly yes, appendfsync always), has no replicas and never evicts
// keys (maxmemory-policy noeviction). It changes nothing. The tenure
// command's doctor prints what it returns; call it at start-up and warn.
//
// What a risk costs now that tokens are floored by the server's clock is
// described in the package documentation (Failure modes): tokens keep
// growing across a loss, but leases are lost (their holders stand down at
// their next renewal, which may be one renew interval later) and so is any
// fence kept on the same server.
//
// It fails when the client cannot send CONFIG or INFO (a client other than
// a *redis.Client or a failover client, or a server or ACL that refuses
// them, as managed services often do): then check the settings by hand.
func (s *Store) CheckDurability(ctx context.Context) ([]Risk, error) {
	if err := s.begin(ctx, "check durability"); err != nil {
		return nil, err
	}
	const op = "check durability"
	c, ok := s.client.(configReader)
	if !ok {
		return nil, fmt.Errorf("redisstore: %s: %w: the client (%T) cannot send CONFIG GET and INFO; check appendonly, appendfsync, maxmemory-policy and the replicas by hand",
			op, store.ErrInvalid, s.client)
	}
	cfg := make(map[string]string)
	for _, p := range []string{"appendonly", "appendfsync", "maxmemory-policy", "min-replicas-to-write"} {
		got, err := c.ConfigGet(ctx, p).Result()
		if err != nil {
			return nil, fmt.Errorf("%w; if the server refuses CONFIG (managed services, ACLs), check its persistence and replicas by hand",
				interpretError(op+": CONFIG GET "+p, err))
		}
		v, ok := got[p]
		if !ok {
			return nil, fmt.Errorf("redisstore: %s: the server does not know the setting %s (renamed or hidden CONFIG?); check its persistence and replicas by hand", op, p)
		}
		cfg[p] = v
	}
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return nil, interpretError(op+": INFO replication", err)
	}
	repl := infoFields(info)
	return durabilityRisks(cfg, repl), nil
}

// durabilityRisks judges the settings CheckDurability read.
func durabilityRisks(cfg, repl map[string]string) []Risk {
	var risks []Risk
	if cfg["appendonly"] != "yes" {
		risks = append(risks, Risk{Setting: "appendonly", Value: cfg["appendonly"],
			Effect: "a restart loses every write since the last RDB snapshot (all of them without snapshots): every lease, the token counter and fences kept on this server; tokens still grow (the server's clock floors them) but holders keep working until their next renewal, and a lost fence accepts a stale token again until a newer one is written; run with appendonly yes and appendfsync always"})
	} else if cfg["appendfsync"] != "always" {
		risks = append(risks, Risk{Setting: "appendfsync", Value: cfg["appendfsync"],
			Effect: "a crash loses the writes acknowledged since the last fsync (about 1 s with everysec, up to the kernel's flush interval with no): leases granted or renewed then, and fence moves; run with appendfsync always"})
	}
	switch role := repl["role"]; role {
	case "master":
		if n, _ := strconv.Atoi(repl["connected_slaves"]); n > 0 {
			risks = append(risks, Risk{Setting: "connected_slaves", Value: repl["connected_slaves"],
				Effect: "replication is asynchronous (min-replicas-to-write " + cfg["min-replicas-to-write"] + " only refuses writes while too few replicas are connected, it does not wait for them): a failover to a replica loses the writes it had not received, leases and fence moves among them; tokens still grow if the replica's clock is not behind by more than the failover takes"})
		}
	case "":
	default:
		risks = append(risks, Risk{Setting: "role", Value: role,
			Effect: "the store is connected to a replica, which refuses the scripts' writes (READONLY) and lags its primary; connect to the primary, or through Sentinel with redis.NewFailoverClient"})
	}
	if p := cfg["maxmemory-policy"]; p != "noeviction" {
		risks = append(risks, Risk{Setting: "maxmemory-policy", Value: p,
			Effect: "under memory pressure the server evicts keys: held keys (ending leases early) and, with allkeys-*, records, the counter and fences; run with maxmemory-policy noeviction"})
	}
	return risks
}

// infoFields parses the field:value lines of an INFO reply.
func infoFields(info string) map[string]string {
	fields := make(map[string]string)
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			fields[k] = v
		}
	}
	return fields
}
