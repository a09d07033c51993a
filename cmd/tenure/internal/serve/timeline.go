package serve

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// Geometry of the timeline, in SVG user units (pixels at zoom 100 %).
const (
	tlWidth     = 1100
	tlLabelW    = 220 // the lease names' column
	tlRight     = 10
	tlRowH      = 26
	tlRowGap    = 8
	tlTop       = 10
	tlAxisH     = 24
	tlMinLabelW = 44 // narrowest segment that gets its token written on it
	tlMaxName   = 28 // longest name, in characters, the names' column shows whole
)

type timeline struct {
	Width, Height int
	PlotX, PlotW  float64
	AxisY         int
	Rows          []tlRow
	Ticks         []tlTick
	Shown, Total  int // leases drawn, and leases with a history
}

type tlRow struct {
	Y, TextY int
	Name     string // shortened to fit the names' column
	FullName string
	Segments []tlSeg
}

type tlSeg struct {
	X, W, TextX float64
	Fill        string
	Label       string // "#12" when wide enough
	Title       string
	Faded       bool // a tenure whose end the history does not know
}

type tlTick struct {
	X     float64
	Label string
}

// tlEntry is one lease's changes, oldest first, as the timeline draws
// them.
type tlEntry struct {
	name    string
	changes []change
	// open says how the last change's segment ends at now: still so
	// (false), or faded with this note, for a tenure that ended at a time
	// the history does not know (an expiry).
	open string
}

// buildTimeline draws the leases whose history changed last, from the first
// read (from) to now; s.mu is held.
func (s *Server) buildTimeline(from, now time.Time, c colours) *timeline {
	all := make([]tlEntry, 0, len(s.history))
	for name, h := range s.history {
		all = append(all, tlEntry{name: name, changes: h.changes})
	}
	return drawTimeline(all, from, now, c)
}

// storeTimeline draws the store's recorded events (oldest first) up to now
// by the store's clock: a tenure from its grant to its release or to the
// next tenure, and to now when the last read still showed it held (faded
// when it did not: the store records no expiry). current is the last
// read's leases.
func storeTimeline(events []store.HistoryEvent, current []store.Record, now time.Time, colours colours) *timeline {
	if len(events) == 0 {
		return nil
	}
	byName := make(map[string]*tlEntry)
	var all []*tlEntry
	for _, ev := range events {
		if ev.Window != "" {
			continue // a window's event is no change of hands
		}
		e := byName[ev.Name]
		if e == nil {
			e = &tlEntry{name: ev.Name}
			byName[ev.Name] = e
			all = append(all, e)
		}
		c := change{at: ev.At, state: store.StateHeld, holder: ev.Holder, token: ev.Token}
		if ev.Kind == store.EventReleased || ev.Kind == store.EventForceReleased {
			c.state = store.StateReleased
		}
		e.changes = append(e.changes, c)
		now = later(now, ev.At)
	}
	held := make(map[string]store.Token, len(current))
	for _, r := range current {
		if r.State == store.StateHeld {
			held[r.Name] = r.Token
		}
	}
	entries := make([]tlEntry, len(all))
	for i, e := range all {
		last := e.changes[len(e.changes)-1]
		if last.state == store.StateHeld && held[e.name] != last.token {
			e.open = "no longer held at the last read: it expired (the store records no expiry time) or moved since"
		}
		entries[i] = *e
	}
	return drawTimeline(entries, events[0].At, now, colours)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// drawTimeline lays out the [MaxTimelineLeases] leases of all that changed
// last, by name, from from to now.
func drawTimeline(all []tlEntry, from, now time.Time, colours colours) *timeline {
	lastAt := func(e tlEntry) time.Time { return e.changes[len(e.changes)-1].at }
	slices.SortFunc(all, func(a, b tlEntry) int {
		if c := lastAt(b).Compare(lastAt(a)); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	tl := &timeline{Width: tlWidth, PlotX: tlLabelW, PlotW: tlWidth - tlLabelW - tlRight, Total: len(all)}
	all = all[:min(len(all), MaxTimelineLeases)]
	slices.SortFunc(all, func(a, b tlEntry) int { return strings.Compare(a.name, b.name) })
	tl.Shown = len(all)
	span := now.Sub(from)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) float64 {
		d := max(0, min(span, t.Sub(from)))
		return tl.PlotX + tl.PlotW*float64(d)/float64(span)
	}
	for i, e := range all {
		y := tlTop + i*(tlRowH+tlRowGap)
		row := tlRow{Y: y, TextY: y + tlRowH/2 + 5, Name: shorten(oneLine(e.name), tlMaxName), FullName: oneLine(e.name)}
		for j, c := range e.changes {
			end, open := now, ""
			if j+1 < len(e.changes) {
				end = e.changes[j+1].at
			} else {
				open = e.open
			}
			x0, x1 := x(c.at), x(end)
			if c.first {
				x0 = x(from) // the state the server found at its first read of the lease
			}
			seg := tlSeg{X: round1(x0), W: round1(max(x1-x0, 1)), Fill: idleFill}
			seg.TextX = round1(seg.X + seg.W/2)
			when := c.at.UTC().Format(clockFormat) + "–" + end.UTC().Format(clockFormat) + " UTC"
			if c.state == store.StateHeld {
				seg.Fill = colours.of(c.holder)
				seg.Title = oneLine(e.name) + ": held by " + oneLine(c.holder.String()) + ", token " + c.token.String() + ", " + when
				if seg.W >= tlMinLabelW {
					seg.Label = "#" + c.token.String()
				}
				if open != "" {
					seg.Faded = true
					seg.Title += "; " + open
				}
			} else {
				seg.Title = oneLine(e.name) + ": " + stateName(c.state) + ", " + when
			}
			row.Segments = append(row.Segments, seg)
		}
		tl.Rows = append(tl.Rows, row)
	}
	tl.AxisY = tlTop + len(all)*(tlRowH+tlRowGap)
	tl.Height = tl.AxisY + tlAxisH
	step := tickStep(span)
	for t := from.Truncate(step).Add(step); !t.After(now); t = t.Add(step) {
		tl.Ticks = append(tl.Ticks, tlTick{X: round1(x(t)), Label: t.UTC().Format(clockFormat)})
	}
	return tl
}

// round1 rounds v to one decimal, enough for pixels.
func round1(v float64) float64 { return math.Round(v*10) / 10 }

// shorten cuts s to n characters, the last an ellipsis, when it is longer.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// clockFormat renders times of day on the page, UTC.
const clockFormat = "15:04:05"

// tickStep picks the time between the axis's ticks: at most eight of them.
func tickStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	} {
		if span/s <= 8 {
			return s
		}
	}
	return 24 * time.Hour
}

// stateName names a state for people; the zero state is a name the store
// never saw.
func stateName(s store.State) string {
	if s == 0 {
		return "absent"
	}
	return s.String()
}
