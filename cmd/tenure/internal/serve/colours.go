package serve

import (
	"slices"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// palette colours holders on the page. Its colours are far apart in hue
// and lightness, and each carries white text (a token on a timeline bar).
var palette = []string{
	"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
	"#17becf", "#8c564b", "#e377c2", "#7f7f00", "#393b79",
}

// idleFill colours the time a lease was not held.
const idleFill = "#e4e4e4"

// colours gives each holder one page shows a colour of its own: the
// holders, in the order they were first seen (oldest first, then by
// name), take the palette's colours in turn, so that up to len(palette)
// holders never share one. (A colour picked by a hash of the holder would
// keep across pages but collide: six holders among ten colours share one
// more often than not.) Past len(palette) holders, colours are reused in
// the same order, and the page says so.
type colours map[store.Holder]string

// of returns h's colour; a holder the page did not list gets the first.
func (c colours) of(h store.Holder) string {
	if col, ok := c[h]; ok {
		return col
	}
	return palette[0]
}

// sighting is a holder and a time the page shows it at.
type sighting struct {
	holder store.Holder
	at     time.Time
}

// assignColours colours the holders of seen by their earliest sighting.
func assignColours(seen []sighting) colours {
	first := map[store.Holder]time.Time{}
	for _, s := range seen {
		if at, ok := first[s.holder]; !ok || s.at.Before(at) {
			first[s.holder] = s.at
		}
	}
	holders := make([]store.Holder, 0, len(first))
	for h := range first {
		holders = append(holders, h)
	}
	slices.SortFunc(holders, func(a, b store.Holder) int {
		if c := first[a].Compare(first[b]); c != 0 {
			return c
		}
		return strings.Compare(a.String(), b.String())
	})
	c := make(colours, len(holders))
	for i, h := range holders {
		c[h] = palette[i%len(palette)]
	}
	return c
}

// pageColours colours every holder the page shows: the leases' holders,
// this server's history and recent changes, and the store's history;
// s.mu is held.
func (s *Server) pageColours() colours {
	var seen []sighting
	for _, h := range s.history {
		for _, c := range h.changes {
			if c.state == store.StateHeld {
				seen = append(seen, sighting{c.holder, c.at})
			}
		}
	}
	for _, n := range s.recent {
		if n.c.state == store.StateHeld {
			seen = append(seen, sighting{n.c.holder, n.c.at})
		}
	}
	if s.last != nil {
		for _, r := range s.last.leases {
			if r.State == store.StateHeld {
				seen = append(seen, sighting{r.Holder, r.AcquiredAt})
			}
		}
		for _, ev := range s.last.events {
			seen = append(seen, sighting{ev.Holder, ev.At})
		}
	}
	return assignColours(seen)
}
