package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/store"
)

// CheckIdentity is the check of identity sources that look inherited.
const CheckIdentity = "identity"

// The agent labels that name a machine: two live agents with the same
// value are two copies of one machine.
var machineLabels = []string{"machine-id", "hostname"}

// DefaultLabel is the holder label tenure run uses on this host without
// --label: the host name.
func DefaultLabel() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "tenure"
}

// checkIdentity looks for identities this host may share with a copy of
// it (a cloned VM, a restored snapshot): live holders on the store with
// this host's label that no process on this host runs, and, when the
// fleet registry is there, live agents that give the same machine-id or
// hostname label.
func checkIdentity(ctx context.Context, o *storeopen.Opened, opts Options) []Finding {
	fs := []Finding{checkHolderLabels(ctx, o, opts)}
	if o.HasRegistry() {
		if f, ok := checkAgentMachines(ctx, o); ok {
			fs = append(fs, f)
		}
	}
	return fs
}

func checkHolderLabels(ctx context.Context, o *storeopen.Opened, opts Options) Finding {
	lister, ok := o.Store.(store.Lister)
	if !ok {
		return Finding{Check: CheckIdentity, Status: OK, Detail: "this store cannot list its leases; holder labels not compared"}
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	recs, err := lister.List(cctx)
	cancel()
	if err != nil {
		return Finding{Check: CheckIdentity, Status: Warn,
			Detail: fmt.Sprintf("cannot list the leases to compare holder labels: %s", o.Target.Redact(err.Error())),
			Fix:    grantFix(ctx, o) + ", then run doctor again"}
	}
	local, complete := opts.LocalHolders()
	var strangers, ours []string
	for _, r := range recs {
		if r.State != store.StateHeld || r.Remaining <= 0 || r.Holder.Label != opts.Label {
			continue
		}
		desc := fmt.Sprintf("%q by %s (token %d)", r.Name, r.Holder, r.Token)
		if local[r.Holder.String()] {
			ours = append(ours, desc)
		} else {
			strangers = append(strangers, desc)
		}
	}
	if len(strangers) == 0 {
		detail := fmt.Sprintf("no live holder uses this host's label %q", opts.Label)
		if len(ours) > 0 {
			detail = fmt.Sprintf("%d live holder(s) use this host's label %q, all running on this host", len(ours), opts.Label)
		}
		return Finding{Check: CheckIdentity, Status: OK, Detail: detail}
	}
	detail := fmt.Sprintf("lease %s: held with this host's label %q, but no process on this host runs that holder", strings.Join(strangers, ", "), opts.Label)
	fix := "another machine uses this host's name: a clone or a restored snapshot of it, or a host with the same name. Give each machine its own host name (or pass --label), and have restore and fork hooks run `tenure revoke-inherited`"
	if !complete {
		fix += "; doctor could not read some processes' environments (another user's, or protected ones), and a holder one of them runs looks foreign too: run doctor as root, or as that user, to tell"
	}
	return Finding{Check: CheckIdentity, Status: Warn, Detail: detail, Fix: fix}
}

// checkAgentMachines compares the machine labels of the fleet registry's
// live agents; ok is false when there is no registry to read.
func checkAgentMachines(ctx context.Context, o *storeopen.Opened) (Finding, bool) {
	reg, err := o.Registry()
	if err != nil {
		return Finding{}, false
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	agents, err := reg.Agents(cctx)
	cancel()
	if errors.Is(err, store.ErrNotMigrated) {
		return Finding{}, false
	}
	if err != nil {
		return Finding{Check: CheckIdentity, Status: Warn,
			Detail: fmt.Sprintf("cannot read the fleet registry's agents: %s", o.Target.Redact(err.Error())),
			Fix:    grantFix(ctx, o) + ", then run doctor again"}, true
	}
	live := 0
	var dups []string
	for _, key := range machineLabels {
		byValue := map[string][]string{}
		for _, a := range agents {
			if v := a.Labels[key]; a.Alive && v != "" {
				byValue[v] = append(byValue[v], a.ID)
			}
		}
		values := make([]string, 0, len(byValue))
		for v := range byValue {
			values = append(values, v)
		}
		sort.Strings(values)
		for _, v := range values {
			if ids := byValue[v]; len(ids) > 1 {
				slices.Sort(ids)
				dups = append(dups, fmt.Sprintf("%s=%q on agents %s", key, v, strings.Join(ids, ", ")))
			}
		}
	}
	for _, a := range agents {
		if a.Alive {
			live++
		}
	}
	if len(dups) == 0 {
		return Finding{Check: CheckIdentity, Status: OK,
			Detail: fmt.Sprintf("no two of the %d live agents share a %s label", live, strings.Join(machineLabels, " or "))}, true
	}
	return Finding{Check: CheckIdentity, Status: Warn,
		Detail: "live agents share a machine identity: " + strings.Join(dups, "; "),
		Fix: "these agents run on copies of one machine (a cloned VM or a restored snapshot kept its /etc/machine-id and host name): on each copy, make a new machine id " +
			"(rm /etc/machine-id && systemd-machine-id-setup) and host name, restart its agent, and have restore hooks run `tenure revoke-inherited`"}, true
}

// LocalHolders returns the holders that processes on this host run, as
// tenure run gives them to its command (TENURE_HOLDER in the environment),
// and whether every process's environment could be read.
func LocalHolders() (map[string]bool, bool) {
	holders := map[string]bool{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return holders, false
	}
	complete := true
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
				complete = false // another user's process, or a protected one
			}
			continue
		}
		for kv := range bytes.SplitSeq(b, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("TENURE_HOLDER=")); ok && len(v) > 0 {
				holders[string(v)] = true
			}
		}
	}
	return holders, complete
}
