package serve

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store"
)

// Size of the browser window, and so of the screenshot.
const shotW, shotH = 1200, 900

// chromium returns Debian's chromium, which the browser tests need: missing,
// it skips the test, or fails it when CI is set.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		const howTo = "install Debian's chromium (apt-get install -y chromium; scripts/test does it) and rerun"
		if os.Getenv("CI") != "" {
			t.Fatalf("chromium is not installed and CI is set: %v; %s", err, howTo)
		}
		t.Skipf("skipping: chromium is not installed: %v; %s", err, howTo)
	}
	return path
}

// browse runs headless chromium on url with the extra arguments and returns
// its standard output.
func browse(t *testing.T, bin, url string, extra ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(t.TempDir(), "profile"),
		"--window-size=1200,900",
	}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	require.NoError(t, cmd.Run(), "chromium %q failed; its standard error:\n%s", extra, stderr.String())
	return stdout.Bytes()
}

// TestBrowser loads the status page in a real headless browser, over a real
// store with a lease held (and handed over once, so the timeline has two
// holders), and checks both the DOM the browser built and a screenshot.
func TestBrowser(t *testing.T) {
	t.Parallel()
	bin := chromium(t)

	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		checkInBrowser(t, bin, openSQLite(t), nil, "sqlite:tenure.db")
	})

	t.Run("SixHolders", func(t *testing.T) {
		t.Parallel()
		checkColoursInBrowser(t, bin, openSQLite(t), 6)
	})

	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		schema := testutil.UniqueName(t)
		t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, schema) })
		sep := "?"
		if strings.Contains(testutil.PostgresURL(), "?") {
			sep = "&"
		}
		target, err := storeurl.Parse(testutil.PostgresURL() + sep + storeurl.ParamSchema + "=" + schema)
		require.NoError(t, err)
		ctx := context.Background()
		opened, err := storeopen.Open(ctx, target, storeopen.Options{})
		testutil.NeedServer(t, "PostgreSQL", err)
		t.Cleanup(func() { require.NoError(t, opened.Close()) })
		_, err = opened.Migrate(ctx)
		require.NoError(t, err)
		reg, err := opened.Registry()
		require.NoError(t, err)
		_, err = reg.Register(ctx, registry.RegisterParams{ID: "host-17", Address: "10.0.0.17:7000"})
		require.NoError(t, err)
		body := checkInBrowser(t, bin, opened.Store, reg, target.Display)
		require.Contains(t, body, `<tr class="agent state-alive"><td class="name">host-17</td>`)
		require.Contains(t, body, "10.0.0.17:7000")
	})
}

// checkColoursInBrowser hands one lease from holder to holder n times,
// serves the page, and reads in the DOM chromium built that each holder's
// bars on the timelines have a colour of their own.
func checkColoursInBrowser(t *testing.T, bin string, st store.Store, n int) {
	t.Helper()
	ctx := context.Background()
	s := newServer(t, Config{Store: st})
	for i := range n {
		g := acquire(t, st, "nightly-billing", testutil.Holder(t, fmt.Sprintf("host-%d", i+1)))
		require.NoError(t, s.Refresh(ctx))
		if i < n-1 {
			release(t, st, g)
			require.NoError(t, s.Refresh(ctx))
		}
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	dom := string(browse(t, bin, srv.URL+"/", "--dump-dom"))

	bars := regexp.MustCompile(`fill="(#[0-9a-f]{6})" stroke="#ffffff" stroke-width="1"><title>nightly-billing: held by (host-\d+)/`).FindAllStringSubmatch(dom, -1)
	fills := map[string]map[string]bool{} // holder → the fills of its bars
	for _, m := range bars {
		if fills[m[2]] == nil {
			fills[m[2]] = map[string]bool{}
		}
		fills[m[2]][m[1]] = true
	}
	require.Len(t, fills, n, "every holder has bars on the timeline")
	owner := map[string]string{} // fill → holder
	for holder, fs := range fills {
		require.Len(t, fs, 1, "%s's bars share one colour", holder)
		for f := range fs {
			require.Empty(t, owner[f], "%s and %s share the colour %s", owner[f], holder, f)
			owner[f] = holder
		}
	}
	require.Contains(t, dom, fmt.Sprintf("Each holder has a colour of its own (up to %d holders).", len(palette)))
}

// checkInBrowser serves st's status page on a free loopback port and checks
// it in chromium; it returns the DOM chromium dumped.
func checkInBrowser(t *testing.T, bin string, st store.Store, reg *registry.Registry, display string) string {
	t.Helper()
	ctx := context.Background()
	s := newServer(t, Config{Store: st, Registry: reg, StoreDisplay: display})
	const name = "nightly-billing"
	g := acquire(t, st, name, testutil.Holder(t, "host-1"))
	require.NoError(t, s.Refresh(ctx))
	release(t, st, g)
	require.NoError(t, s.Refresh(ctx))
	holder := testutil.Holder(t, "host-2")
	g2 := acquire(t, st, name, holder)
	require.NoError(t, s.Refresh(ctx))

	// Keep reading, as tenure serve does, while the browser takes its time.
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- s.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, testutil.Receive(t, ran, "Run's return", 30*time.Second))
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	url := srv.URL + "/"

	dom := string(browse(t, bin, url, "--dump-dom"))
	require.Contains(t, dom, `<tr class="lease state-held" data-lease="`+name+`">`)
	require.Contains(t, dom, "host-2/"+holder.Instance)
	require.Contains(t, dom, `<td class="num">`+g2.Token.String()+`</td>`)
	require.Contains(t, dom, `<svg class="timeline"`)
	require.Contains(t, dom, "store healthy")
	_, recorded, ok := strings.Cut(dom, `<section id="store-history">`)
	require.True(t, ok, "the page has the store's history")
	require.Contains(t, recorded, `<svg class="timeline"`, "the store's history is drawn")
	require.Contains(t, recorded, ">#"+g2.Token.String()+"</text>")
	require.Equal(t, 3, strings.Count(recorded, `<tr class="event event-`), "granted, released, granted")
	require.Contains(t, recorded, fmt.Sprintf("%s (token %d)", g.Holder, g.Token), "the new tenure names the one before")

	shot := filepath.Join(t.TempDir(), "page.png")
	browse(t, bin, url, "--screenshot="+shot)
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	img, err := png.Decode(f)
	require.NoError(t, err, "the screenshot is a PNG")
	require.Equal(t, image.Rect(0, 0, shotW, shotH), img.Bounds())
	// host-1 held the lease first, host-2 second: the palette's second colour.
	colours, holderPixels := scan(img, palette[1])
	t.Logf("screenshot: %d colours, %d pixels of the holder's colour %s", colours, holderPixels, palette[1])
	require.GreaterOrEqual(t, colours, 20, "a page with text, tables and a timeline has many colours; a blank one has few")
	require.GreaterOrEqual(t, holderPixels, 200, "the timeline's bar in the current holder's colour %s", palette[1])
	return dom
}

// scan counts the distinct colours of img and its pixels within a small
// distance of the colour hex (#rrggbb).
func scan(img image.Image, hex string) (colours, matching int) {
	var want [3]int
	for i := range want {
		var v int
		for _, c := range hex[1+2*i : 3+2*i] {
			v = v*16 + strings.IndexRune("0123456789abcdef", c)
		}
		want[i] = v
	}
	seen := map[[3]uint8]struct{}{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			px := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
			seen[px] = struct{}{}
			if near(int(px[0]), want[0]) && near(int(px[1]), want[1]) && near(int(px[2]), want[2]) {
				matching++
			}
		}
	}
	return len(seen), matching
}

// TestScan checks the screenshot check itself: a blank page fails it.
func TestScan(t *testing.T) {
	t.Parallel()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	colours, matching := scan(img, "#1f77b4")
	require.Equal(t, 1, colours)
	require.Zero(t, matching)
	for y := 5; y < 15; y++ {
		for x := 5; x < 25; x++ {
			img.Set(x, y, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff})
		}
	}
	colours, matching = scan(img, "#1f77b4")
	require.Equal(t, 2, colours)
	require.Equal(t, 200, matching)
}

func near(a, b int) bool { return a-b <= 3 && b-a <= 3 }
