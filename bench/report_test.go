package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReportRendersRatiosAndPicture renders a report made by hand: each
// latency carries its ratio to the store's paced write floor, and the
// picture has one dot per trial and a p50 bar per row and panel.
func TestReportRendersRatiosAndPicture(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	res := &result{
		acquire:      []time.Duration{3 * ms, 3 * ms, 3 * ms},
		release:      []time.Duration{2 * ms},
		storeAcquire: []time.Duration{2 * ms},
		storeRelease: []time.Duration{3 * ms},
		handover:     []time.Duration{2 * ms, 4 * ms, 6 * ms},
		failover:     []time.Duration{3010 * ms, 3030 * ms},
		Churn:        []churn{{Clients: 2, PerSec: 100, Jain: 0.95}},
	}
	res.summarise()
	rep := &report{
		Params:   map[string]any{"hold": "2ms", "many": 1000},
		Floors:   map[string]map[string]*dist{"postgres": {"write paced": {P50: 2 * ms}}},
		Subjects: []*subject{{Name: "tenure", Store: "postgres", Profile: "3s", TTL: 3 * time.Second, Result: res}},
	}
	md := rep.markdown(svgName)
	require.NotContains(t, md, "**noisy**")
	rep.Host = map[string]string{"cpus": "2", "loadavg_start": "0.50 0.40 0.30", "loadavg_end": "2.50 1.00 0.50"}
	require.Contains(t, rep.markdown(svgName), "**noisy**")
	require.Contains(t, md, "| tenure | postgres | 3.00 s | 3.00 ms (1.50×) | 2.00 ms (1.00×) | +1.00 ms / −1.00 ms | – |")
	require.Contains(t, md, "| 4.00 ms / 6.00 ms (2.0×) | 3.01 s / 3.03 s |")
	require.Contains(t, md, " 100 (0.95) |")

	circles, lines := 0, 0
	dec := xml.NewDecoder(bytes.NewReader(rep.svg()))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "circle":
				circles++
			case "line":
				for _, a := range se.Attr {
					if a.Name.Local == "stroke" && strings.HasPrefix(a.Value, "#d6") {
						lines++
					}
				}
			}
		}
	}
	require.Equal(t, 5, circles)
	require.Equal(t, 2, lines)
}
