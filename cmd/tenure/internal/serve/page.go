package serve

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store"
)

//go:embed templates/page.html templates/style.css
var files embed.FS

var page = template.Must(template.New("page.html").Funcs(template.FuncMap{"show": visibleHTML, "plain": oneLine}).ParseFS(files, "templates/page.html"))

// RefreshSeconds is how often the page reloads itself (a meta refresh: the
// page has no script).
const RefreshSeconds = 2

// timeFormat renders instants on the page, UTC.
const timeFormat = "2006-01-02 15:04:05.000 UTC"

type pageData struct {
	Store, Now, Started, Watching string
	Refresh                       int
	Healthy                       bool
	Health                        string
	HaveRead                      bool
	ReadAge, ReadTook             string
	Leases                        []leaseRow
	Total, Held, Hidden           int
	// Holders is how many holders the page colours; past the palette's
	// size, colours repeat and the page says so.
	Holders, Colours int
	HasRegistry      bool
	Agents           []agentRow
	AgentsErr        string
	Timeline         *timeline
	Changes          []changeRow
	History, Recent  int
	// The store's own history, when it is a [store.Historian].
	Historian     bool
	Events        []eventRow
	EventsErr     string
	StoreTimeline *timeline
	MaxEvents     int
}

type eventRow struct {
	At, Name, Event, Holder, Token, Previous, Color string
}

type leaseRow struct {
	Name, State, Holder, Color string
	Token, Seq                 string
	Remaining, AcquiredAt      string
	Payload                    string // the current or last tenure's
}

type agentRow struct {
	ID, State, HeartbeatAge, Address, Instance, Labels string
	Owned                                              int64
}

type changeRow struct {
	At, Name, What, Color string
}

func (s *Server) servePage(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	healthy, health := s.health(now)
	d := s.pageData(now)
	d.Healthy, d.Health = healthy, health
	var buf bytes.Buffer
	if err := page.Execute(&buf, d); err != nil {
		http.Error(w, "rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes()) // a client that went away needs no answer
}

func (s *Server) pageData(now time.Time) pageData {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := pageData{
		Store:       s.cfg.StoreDisplay,
		Now:         now.UTC().Format(timeFormat),
		Refresh:     RefreshSeconds,
		HasRegistry: s.cfg.Registry != nil,
		History:     s.cfg.History,
		Recent:      MaxRecentChanges,
		MaxEvents:   MaxStoreEvents,
	}
	_, d.Historian = s.cfg.Store.(store.Historian)
	if !s.started.IsZero() {
		d.Started = s.started.UTC().Format(timeFormat)
		d.Watching = ago(now, s.started)
	}
	if s.last == nil {
		return d
	}
	d.HaveRead = true
	d.ReadAge = ago(now, s.last.at)
	d.ReadTook = took(s.last.took)
	d.Total = len(s.last.leases)
	colours := s.pageColours()
	d.Holders, d.Colours = len(colours), len(palette)
	for i, r := range s.last.leases {
		if r.State == store.StateHeld {
			d.Held++
		}
		if i >= MaxRows {
			continue
		}
		d.Leases = append(d.Leases, toLeaseRow(r, colours))
	}
	d.Hidden = d.Total - len(d.Leases)
	for _, a := range s.last.agents {
		d.Agents = append(d.Agents, toAgentRow(a))
	}
	if s.last.agentsErr != nil {
		d.AgentsErr = s.last.agentsErr.Error()
	}
	d.Timeline = s.buildTimeline(s.started, now, colours)
	d.Changes = s.recentChanges(colours)
	if s.last.eventsErr != nil {
		d.EventsErr = s.last.eventsErr.Error()
	}
	for _, ev := range slices.Backward(s.last.events) {
		d.Events = append(d.Events, toEventRow(ev, colours))
	}
	d.StoreTimeline = storeTimeline(s.last.events, s.last.leases, s.last.at, colours)
	return d
}

func toEventRow(ev store.HistoryEvent, colours colours) eventRow {
	r := eventRow{
		At: ev.At.UTC().Format(timeFormat), Name: ev.Name, Event: ev.Kind.String(),
		Holder: ev.Holder.String(), Token: ev.Token.String(), Previous: "-", Color: colours.of(ev.Holder),
	}
	if ev.PreviousToken != 0 {
		r.Previous = ev.PreviousHolder.String() + " (token " + ev.PreviousToken.String() + ")"
	}
	return r
}

func toLeaseRow(r store.Record, colours colours) leaseRow {
	l := leaseRow{Name: r.Name, State: stateName(r.State), Holder: r.Holder.String(), Token: "-", Seq: "-", Remaining: "-", AcquiredAt: "-", Payload: r.Payload}
	if r.Token > 0 {
		l.Token = r.Token.String()
	}
	if r.State != 0 {
		l.Seq = strconv.FormatInt(r.Seq, 10)
		l.AcquiredAt = r.AcquiredAt.UTC().Format(timeFormat)
	}
	if r.State == store.StateHeld {
		l.Remaining = r.Remaining.Round(time.Millisecond).String()
		l.Color = colours.of(r.Holder)
	}
	return l
}

func toAgentRow(a registry.Agent) agentRow {
	state := "stale"
	switch {
	case a.Alive:
		state = "alive"
	case a.Deregistered:
		state = "deregistered"
	}
	keys := make([]string, 0, len(a.Labels))
	for k := range a.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	labels := make([]string, len(keys))
	for i, k := range keys {
		labels[i] = k + "=" + a.Labels[k]
	}
	return agentRow{
		ID: a.ID, State: state, HeartbeatAge: a.HeartbeatAge.Round(time.Millisecond).String(),
		Address: a.Address, Instance: a.Instance, Labels: strings.Join(labels, ", "), Owned: a.Owned,
	}
}

// recentChanges lists the latest changes this server saw, newest first;
// s.mu is held.
func (s *Server) recentChanges(colours colours) []changeRow {
	rows := make([]changeRow, 0, len(s.recent))
	for _, n := range slices.Backward(s.recent) {
		row := changeRow{At: n.c.at.UTC().Format(timeFormat), Name: n.name, What: describe(n.c)}
		if n.c.state == store.StateHeld {
			row.Color = colours.of(n.c.holder)
		}
		rows = append(rows, row)
	}
	return rows
}

// describe says what a change was, for people.
func describe(c change) string {
	var what string
	switch c.state {
	case store.StateHeld:
		what = "held by " + c.holder.String() + " with token " + c.token.String()
	case 0:
		what = "absent: the store has never seen this lease"
	default:
		what = c.state.String()
		if c.token > 0 {
			what += " (last holder " + c.holder.String() + ", token " + c.token.String() + ")"
		}
	}
	if c.first {
		return "first seen: " + what
	}
	return what
}

func serveCSS(w http.ResponseWriter, _ *http.Request) {
	css, err := files.ReadFile("templates/style.css")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(css) // a client that went away needs no answer
}
