package metrics_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/metrics"
	"github.com/tenure-dev/tenure/store/memstore"
)

// A client reports to the Observer set in its Config; the registry is
// yours (serve it with promhttp.HandlerFor).
func Example() {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(metrics.Config{Registerer: reg})
	if err != nil {
		panic(err)
	}
	st := memstore.New(memstore.Config{})
	defer st.Close()
	client, err := tenure.New(st, tenure.Config{Label: "billing-worker", Observer: m})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- client.Run(ctx) }()
	defer func() { cancel(); <-ran }()

	l, err := client.Acquire(ctx, "nightly-invoice-run")
	if err != nil {
		panic(err)
	}
	show(reg, "tenure_lease_held", "tenure_lease_token")
	if err := l.Release(ctx); err != nil {
		panic(err)
	}
	show(reg, "tenure_lease_held", "tenure_losses_total")
	// Output:
	// tenure_lease_held{lease="nightly-invoice-run",store="memstore"} 1
	// tenure_lease_token{lease="nightly-invoice-run",store="memstore"} 1
	// tenure_lease_held{lease="nightly-invoice-run",store="memstore"} 0
	// tenure_losses_total{lease="nightly-invoice-run",reason="released",store="memstore"} 1
}

// show prints the named metrics as a scrape would.
func show(reg *prometheus.Registry, names ...string) {
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if !slices.Contains(names, f.GetName()) {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			fmt.Printf("%s{%s} %g\n", f.GetName(), strings.Join(labels, ","), v)
		}
	}
}
