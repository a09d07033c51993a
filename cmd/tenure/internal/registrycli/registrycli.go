package registrycli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/registry"
)

// Exit codes (see the package documentation).
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitNoOwner     = 3
	ExitOwnerDead   = 4
	ExitUsage       = 64 // EX_USAGE
	ExitUnavailable = 69 // EX_UNAVAILABLE
	ExitNotMigrated = 78 // EX_CONFIG
)

// AgentsUsage and OwnerUsage are the subcommands' usage lines, after
// "tenure ".
const (
	AgentsUsage = "agents [--json]"
	OwnerUsage  = "owner RESOURCE [--json]"
)

// Agents lists every agent the registry knows, with its state and heartbeat
// age by the store's clock and the number of resources it owns.
func Agents(ctx context.Context, reg *registry.Registry, args []string, stdout, stderr io.Writer) int {
	const cmd = "agents"
	fs, jsonOut := newFlags(cmd)
	pos, code, done := parse(fs, args, stdout, stderr, cmd, AgentsUsage)
	if done {
		return code
	}
	if len(pos) != 0 {
		return usage(stderr, cmd, "unexpected argument %q; usage: tenure %s", pos[0], AgentsUsage)
	}
	if reg == nil {
		return fail(stderr, cmd, fmt.Errorf("%w: no registry", store.ErrInvalid))
	}
	agents, err := reg.Agents(ctx)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	if *jsonOut {
		out := agentsJSON{Agents: make([]agentJSON, 0, len(agents))}
		for _, a := range agents {
			out.Agents = append(out.Agents, toAgentJSON(a))
		}
		return writeJSON(stdout, stderr, cmd, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSTATE\tHEARTBEAT AGE\tOWNED\tADDRESS\tINSTANCE\tLABELS")
	for _, a := range agents {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n",
			oneLine(a.ID), state(a), a.HeartbeatAge.Round(time.Millisecond), a.Owned,
			oneLine(a.Address), oneLine(a.Instance), oneLine(labels(a.Labels)))
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, cmd, err)
	}
	if len(agents) == 0 {
		fmt.Fprintln(stderr, "tenure: agents: no agent has registered")
	}
	return ExitOK
}

// Owner answers who owns RESOURCE: exit 0 when the owner is alive,
// [ExitNoOwner] when it has none, [ExitOwnerDead] when its owner is dead.
func Owner(ctx context.Context, reg *registry.Registry, args []string, stdout, stderr io.Writer) int {
	const cmd = "owner"
	fs, jsonOut := newFlags(cmd)
	pos, code, done := parse(fs, args, stdout, stderr, cmd, OwnerUsage)
	if done {
		return code
	}
	switch {
	case len(pos) == 0:
		return usage(stderr, cmd, "missing RESOURCE; usage: tenure %s", OwnerUsage)
	case len(pos) > 1:
		return usage(stderr, cmd, "unexpected argument %q; usage: tenure %s", pos[1], OwnerUsage)
	}
	resource := pos[0]
	if err := registry.ValidateResource(resource); err != nil {
		return usage(stderr, cmd, "%s", strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": "))
	}
	if reg == nil {
		return fail(stderr, cmd, fmt.Errorf("%w: no registry", store.ErrInvalid))
	}
	own, err := reg.Owner(ctx, resource)
	var dead *registry.OwnerDeadError
	switch {
	case err == nil:
		if *jsonOut {
			return writeJSON(stdout, stderr, cmd, ownerJSON{
				Resource: resource, Outcome: "alive", Agent: own.Agent.ID, Address: own.Agent.Address,
				LastHeartbeat: timePtr(own.Agent.LastHeartbeat), HeartbeatAgeMS: own.Agent.HeartbeatAge.Milliseconds(),
				CreatedAt: timePtr(own.CreatedAt), Metadata: own.Metadata,
			})
		}
		fmt.Fprintf(stdout, "%s: owned by %s (%s), alive: last heartbeat %s ago by the store's clock\n",
			oneLine(resource), oneLine(own.Agent.ID), oneLine(own.Agent.Address), own.Agent.HeartbeatAge.Round(time.Millisecond))
		return ExitOK
	case errors.As(err, &dead):
		if *jsonOut {
			if code := writeJSON(stdout, stderr, cmd, ownerJSON{
				Resource: resource, Outcome: "owner_dead", Agent: dead.Agent,
				LastHeartbeat: timePtr(dead.LastHeartbeat), HeartbeatAgeMS: dead.Age.Milliseconds(),
				Deregistered: dead.Deregistered,
			}); code != ExitOK {
				return code
			}
			return ExitOwnerDead
		}
		what := fmt.Sprintf("dead: last heartbeat %s ago by the store's clock", dead.Age.Round(time.Millisecond))
		switch {
		case dead.LastHeartbeat.IsZero():
			what = "dead: the agent is not registered at all"
		case dead.Deregistered:
			what = fmt.Sprintf("dead: deregistered, last heartbeat %s ago by the store's clock", dead.Age.Round(time.Millisecond))
		}
		fmt.Fprintf(stdout, "%s: owned by %s, %s\n", oneLine(resource), oneLine(dead.Agent), what)
		fmt.Fprintf(stderr, "tenure: owner: do not place %s elsewhere: its data is on %s; wait for the agent, or reassign it deliberately\n",
			oneLine(resource), oneLine(dead.Agent))
		return ExitOwnerDead
	case errors.Is(err, registry.ErrNoOwner):
		if *jsonOut {
			if code := writeJSON(stdout, stderr, cmd, ownerJSON{Resource: resource, Outcome: "no_owner"}); code != ExitOK {
				return code
			}
			return ExitNoOwner
		}
		fmt.Fprintf(stdout, "%s: no owner\n", oneLine(resource))
		return ExitNoOwner
	}
	return fail(stderr, cmd, err)
}

// newFlags makes a subcommand's flag set with --json.
func newFlags(cmd string) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	jsonOut := fs.Bool("json", false, "print JSON, one object on one line")
	return fs, jsonOut
}

// parse parses args, letting flags follow positional arguments. done
// reports that the subcommand ends here with code (help or a usage error).
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, cmd, synopsis string) (pos []string, code int, done bool) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "usage: tenure %s\n", synopsis)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil, ExitOK, true
		}
		if err != nil {
			return nil, usage(stderr, cmd, "%v", err), true
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, 0, false
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), 0, false
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func usage(stderr io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(stderr, "tenure: %s: %s (see `tenure help %s`)\n", cmd, oneLine(fmt.Sprintf(format, args...)), cmd)
	return ExitUsage
}

// fail prints err as one line and returns its exit code.
func fail(stderr io.Writer, cmd string, err error) int {
	code := ExitFailure
	msg := oneLine(err.Error())
	switch {
	case errors.Is(err, store.ErrInvalid):
		code = ExitUsage
	case errors.Is(err, store.ErrNotMigrated):
		code = ExitNotMigrated
		if !strings.Contains(msg, "tenure migrate") {
			msg += "; run `tenure migrate` as the schema's owner"
		}
	case errors.Is(err, store.ErrUnavailable):
		code = ExitUnavailable
	}
	fmt.Fprintf(stderr, "tenure: %s: %s\n", cmd, msg)
	return code
}

func writeJSON(stdout, stderr io.Writer, cmd string, v any) int {
	buf, err := json.Marshal(v)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", buf); err != nil {
		return fail(stderr, cmd, err)
	}
	return ExitOK
}

// oneLine replaces every character that would act on a terminal instead
// of showing (controls, bidirectional controls, invisible format
// characters) with '?', so a stored name can neither break the output's
// lines or columns nor disguise itself.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r != ' ' && !unicode.IsGraphic(r) {
			return '?' // a control, bidirectional or invisible character
		}
		return r
	}, s)
}

func state(a registry.Agent) string {
	switch {
	case a.Alive:
		return "alive"
	case a.Deregistered:
		return "deregistered"
	}
	return "stale"
}

func labels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + oneLine(m[k])
	}
	return strings.Join(parts, ",")
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

type agentsJSON struct {
	Agents []agentJSON `json:"agents"`
}

type agentJSON struct {
	ID                   string            `json:"id"`
	State                string            `json:"state"`
	Instance             string            `json:"instance"`
	Address              string            `json:"address"`
	Labels               map[string]string `json:"labels"`
	Capacity             json.RawMessage   `json:"capacity"`
	Owned                int64             `json:"owned"`
	Seq                  int64             `json:"seq"`
	RegisteredAt         *time.Time        `json:"registered_at"`
	LastHeartbeat        *time.Time        `json:"last_heartbeat"`
	HeartbeatAgeMS       int64             `json:"heartbeat_age_ms"`
	LastGapMS            int64             `json:"last_gap_ms"`
	HeartbeatIntervalMS  int64             `json:"heartbeat_interval_ms"`
	StaleAfterMS         int64             `json:"stale_after_ms"`
	Conflicts            int64             `json:"conflicts"`
	LastConflictAt       *time.Time        `json:"last_conflict_at"`
	LastConflictInstance string            `json:"last_conflict_instance"`
}

func toAgentJSON(a registry.Agent) agentJSON {
	capacity := a.Capacity
	if len(capacity) == 0 {
		capacity = json.RawMessage("null")
	}
	return agentJSON{
		ID: a.ID, State: state(a), Instance: a.Instance, Address: a.Address, Labels: a.Labels,
		Capacity: capacity, Owned: a.Owned, Seq: a.Seq,
		RegisteredAt: timePtr(a.RegisteredAt), LastHeartbeat: timePtr(a.LastHeartbeat),
		HeartbeatAgeMS: a.HeartbeatAge.Milliseconds(), LastGapMS: a.LastGap.Milliseconds(),
		HeartbeatIntervalMS: a.HeartbeatInterval.Milliseconds(), StaleAfterMS: a.StaleAfter.Milliseconds(),
		Conflicts: a.Conflicts, LastConflictAt: timePtr(a.LastConflictAt), LastConflictInstance: a.LastConflictInstance,
	}
}

type ownerJSON struct {
	Resource       string          `json:"resource"`
	Outcome        string          `json:"outcome"`
	Agent          string          `json:"agent"`
	Address        string          `json:"address"`
	LastHeartbeat  *time.Time      `json:"last_heartbeat"`
	HeartbeatAgeMS int64           `json:"heartbeat_age_ms"`
	Deregistered   bool            `json:"deregistered"`
	CreatedAt      *time.Time      `json:"created_at"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
}
