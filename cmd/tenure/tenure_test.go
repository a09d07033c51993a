package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/faultnet"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// store is a fresh, migrated store for one test.
type store struct {
	kind string
	url  string
	// PostgreSQL only: the schema, and a pool with its owner's rights.
	schema string
	owner  *pgxpool.Pool
}

// sqliteStore makes a database file of the test's own, created by the
// tenure binary before any test process races to open it.
func sqliteStore(t *testing.T) store {
	t.Helper()
	s := store{kind: "sqlite", url: "sqlite:" + filepath.Join(t.TempDir(), "tenure.db")}
	p := run(t, testEnv(t), "migrate", "--store", s.url)
	require.Equal(t, 0, p.code, p.stderr.all())
	return s
}

// pgStore makes a schema of the test's own and migrates it with the
// tenure binary.
func pgStore(t *testing.T) store {
	t.Helper()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	schema := testutil.UniqueName(t)
	t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, schema) })
	u, err := url.Parse(testutil.PostgresURL())
	require.NoError(t, err)
	q := u.Query()
	q.Set(storeurl.ParamSchema, schema)
	u.RawQuery = q.Encode()
	s := store{kind: "postgres", url: u.String(), schema: schema, owner: owner}
	p := run(t, testEnv(t), "migrate", "--store", s.url)
	require.Equal(t, 0, p.code, p.stderr.all())
	return s
}

// bothStores runs f against SQLite and PostgreSQL, in parallel subtests.
func bothStores(t *testing.T, f func(t *testing.T, s store)) {
	t.Helper()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		f(t, sqliteStore(t))
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		f(t, pgStore(t))
	})
}

func (s store) env(t *testing.T, extra ...string) []string {
	t.Helper()
	return testEnv(t, append([]string{storeurl.EnvVar + "=" + s.url}, extra...)...)
}

// psqlEnv points psql at the test server, with search_path set to the
// test's schema, through the standard PG* variables.
func (s store) psqlEnv(t *testing.T) []string {
	t.Helper()
	u, err := url.Parse(testutil.PostgresURL())
	require.NoError(t, err)
	env := []string{
		"PGHOST=" + u.Hostname(),
		"PGDATABASE=" + strings.TrimPrefix(u.Path, "/"),
		"PGOPTIONS=-c search_path=" + s.schema,
		"PGCONNECT_TIMEOUT=5",
	}
	if p := u.Port(); p != "" {
		env = append(env, "PGPORT="+p)
	}
	if u.User != nil {
		env = append(env, "PGUSER="+u.User.Username())
		if pw, ok := u.User.Password(); ok {
			env = append(env, "PGPASSWORD="+pw)
		}
	}
	if m := u.Query().Get("sslmode"); m != "" {
		env = append(env, "PGSSLMODE="+m)
	}
	return env
}

// awaitListeners waits until n sessions listen for the notifications of
// the test's schema, so that a waiter is sure to hear of a release: a
// notification sent before its LISTEN is lost (they are an optimisation),
// and the waiter would then take over only at expiry.
func (s store) awaitListeners(t *testing.T, n int) {
	t.Helper()
	if s.kind != "postgres" {
		return
	}
	ctx := ctxTimeout(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var got int
		require.NoError(t, s.owner.QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND strpos(query, $1) > 0`,
			s.schema+".").Scan(&got))
		if got >= n {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%d sessions listen for the schema %s, not %d", got, s.schema, n)
		}
	}
}

// rest waits for the output to end and returns all of it.
func (l *lines) rest() string {
	l.t.Helper()
	select {
	case <-l.done:
	case <-time.After(patience):
		l.t.Fatalf("output did not end within %s", patience)
	}
	return l.all()
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

type leaseJSON struct {
	Name        string     `json:"name"`
	State       string     `json:"state"`
	Holder      string     `json:"holder"`
	Label       string     `json:"label"`
	Instance    string     `json:"instance"`
	Token       int64      `json:"token"`
	Seq         int64      `json:"seq"`
	AcquiredAt  *time.Time `json:"acquired_at"`
	ExpiresInMS int64      `json:"expires_in_ms"`
	Payload     string     `json:"payload"`
}

func status(t *testing.T, env []string, name string) leaseJSON {
	t.Helper()
	p := run(t, env, "status", "--json", name)
	require.Equal(t, 0, p.code, p.stderr.all())
	var snap struct {
		Leases []leaseJSON `json:"leases"`
	}
	dec := json.NewDecoder(strings.NewReader(p.stdout.rest()))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&snap))
	require.Len(t, snap.Leases, 1)
	return snap.Leases[0]
}

// blockingChild prints "started HOLDER TOKEN" and waits for its standard
// input (tenure's) to close.
var blockingChild = []string{"--", "sh", "-c", `echo "started $TENURE_HOLDER $TENURE_TOKEN"; read x || :`}

const startedLine = `^started (\S+)/(\S+) (\d+)$`

func TestRunIsExclusive(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		env := s.env(t)
		a := start(t, env, append([]string{"run", "--name", "nightly", "--label", "a"}, blockingChild...)...)
		b := start(t, env, append([]string{"run", "--name", "nightly", "--label", "b"}, blockingChild...)...)

		var winner, loser *proc
		select {
		case <-a.exited:
			winner, loser = b, a
		case <-b.exited:
			winner, loser = a, b
		case <-time.After(patience):
			t.Fatalf("neither run gave up; stderr a:\n%s\nstderr b:\n%s", a.stderr.all(), b.stderr.all())
		}
		require.Equal(t, cli.ExitNotAcquired, loser.code, loser.stderr.all())
		m := winner.stdout.await(startedLine)
		require.Empty(t, loser.stdout.rest(), "the loser's command ran")
		errs := loser.stderr.rest()
		require.NotContains(t, errs, "\n")
		require.Regexp(t, fmt.Sprintf(`^tenure: lease "nightly" is held by %s/%s with token %s for another \S+ by the store's clock; not acquired`, m[1], m[2], m[3]), errs)

		winner.closeStdin()
		require.Equal(t, 0, winner.wait(), winner.stderr.all())
		require.Equal(t, "released", status(t, env, "nightly").State)
	})
}

func TestRunWaitTakesOverAtRelease(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	bothStores(t, func(t *testing.T, s store) {
		env := s.env(t)
		a := start(t, env, append([]string{"run", "--name", "nightly", "--ttl", ttl.String(), "--label", "a"}, blockingChild...)...)
		first := atoi(t, a.stdout.await(startedLine)[3])
		b := start(t, env, append([]string{"run", "--name", "nightly", "--ttl", ttl.String(), "--label", "b", "--wait"}, blockingChild...)...)
		b.stderr.await(fmt.Sprintf(`^tenure: lease "nightly" is held by a/\S+ with token %d for another \S+ by the store's clock; waiting for it$`, first))
		s.awaitListeners(t, 2)

		released := time.Now()
		a.closeStdin()
		require.Equal(t, 0, a.wait(), a.stderr.all())
		m := b.stdout.await(startedLine)
		handover := time.Since(released)
		t.Logf("%s: the waiter's command started %s after the holder's ended", s.kind, handover)
		require.Less(t, handover, ttl/5, "the waiter took over long after the release")
		require.Equal(t, "b", m[1])
		require.Greater(t, atoi(t, m[3]), first)

		b.closeStdin()
		require.Equal(t, 0, b.wait(), b.stderr.all())
	})
}

// tickReader reads the ticker helper's FIFO and notes when it ends.
type tickReader struct {
	path  string
	first chan struct{}
	done  chan struct{}
	last  time.Time // the last tick written
	end   time.Time // when the FIFO ended: the ticker had died
	err   error
}

func readTicks(t *testing.T) *tickReader {
	t.Helper()
	r := &tickReader{path: filepath.Join(t.TempDir(), "ticks"), first: make(chan struct{}), done: make(chan struct{})}
	require.NoError(t, syscall.Mkfifo(r.path, 0o600))
	go func() {
		defer close(r.done)
		f, err := os.Open(r.path) // blocks until the ticker opens it
		if err != nil {
			r.err = err
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			ns, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "tick "), 10, 64)
			if err != nil {
				r.err = err
				return
			}
			if r.last.IsZero() {
				close(r.first)
			}
			r.last = time.Unix(0, ns)
		}
		r.end = time.Now()
		r.err = sc.Err()
	}()
	t.Cleanup(func() {
		// Unblock the open if the ticker never came: a writer that comes
		// and goes ends the reader.
		if f, err := os.OpenFile(r.path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = f.Close()
		}
		<-r.done
	})
	return r
}

func TestRunStopsCommandBeforeExpiryWhenStoreUnreachable(t *testing.T) {
	t.Parallel()
	t.Run("Grace1s", func(t *testing.T) {
		t.Parallel()
		stopsBeforeExpiry(t, "--grace", "1s")
	})
	// Without --grace the client's grace is TTL/4 (the 10s default does
	// not fit a 5s TTL): the SIGKILL must come from that, not from 10s.
	t.Run("DefaultGrace", func(t *testing.T) {
		t.Parallel()
		stopsBeforeExpiry(t)
	})
}

func stopsBeforeExpiry(t *testing.T, flags ...string) {
	const ttl = 5 * time.Second
	s := pgStore(t)
	u, err := url.Parse(s.url)
	require.NoError(t, err)
	proxy, err := faultnet.Listen(u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, proxy.Close()) })
	u.Host = proxy.Addr()

	ticks := readTicks(t)
	self, err := os.Executable()
	require.NoError(t, err)
	env := testEnv(t, helperEnv+"=ticker", helperFIFO+"="+ticks.path)
	p := start(t, env, append(append([]string{"run", "--name", "nightly", "--ttl", ttl.String()}, flags...), "--store", u.String(), "--", self)...)
	select {
	case <-ticks.first:
	case <-ticks.done:
		t.Fatalf("the ticker never ticked (%v); tenure's stderr:\n%s", ticks.err, p.stderr.all())
	case <-time.After(patience):
		t.Fatalf("the ticker never ticked; tenure's stderr:\n%s", p.stderr.all())
	}

	cut := time.Now()
	proxy.BlackHole()
	select {
	case <-ticks.done:
	case <-time.After(patience):
		t.Fatal("the command is still running long after the store became unreachable")
	}
	require.NoError(t, ticks.err)
	exited := time.Now()
	require.Equal(t, cli.ExitLost, p.wait(), p.stderr.all())
	line := p.stderr.await(`^tenure: lost lease "nightly" with token (\d+): `)
	require.NotContains(t, p.stderr.all(), "goroutine")

	// The store's expiry of the tenure: its last successful renewal plus
	// the TTL, by the server's clock (the same host's clock as ours).
	var expires time.Time
	var token int64
	require.NoError(t, s.owner.QueryRow(ctxTimeout(t),
		`SELECT expires_at, token FROM `+pgx.Identifier{s.schema, "tenure_leases"}.Sanitize()+` WHERE name = 'nightly'`).Scan(&expires, &token))
	require.Equal(t, token, atoi(t, line[1]))
	t.Logf("store cut at %s; command dead at %s; lease expiry at the store %s: %s to spare",
		cut.Format(time.StampMilli), ticks.end.Format(time.StampMilli), expires.Format(time.StampMilli), expires.Sub(ticks.end))
	require.True(t, ticks.last.Before(expires), "the command ticked at %s, after the lease expired at %s", ticks.last, expires)
	require.True(t, ticks.end.Before(expires), "the command died at %s, after the lease expired at %s", ticks.end, expires)
	require.Less(t, ticks.end.Sub(cut), ttl)
	// tenure does not linger on connections the partition left hanging.
	require.Less(t, time.Since(exited), 2*storeopen.CloseTimeout)
}

// lateWriter is a command that, when told to stop, makes one last fenced
// write with the recipe from the documentation and reports psql's result.
const lateWriter = `
late_write() {
	psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -v TENURE_TOKEN="$TENURE_TOKEN" 2>&1 <<'SQL'
BEGIN;
SELECT tenure_fence('invoice-run', :'TENURE_TOKEN');
COMMIT;
SQL
	echo "late write exit $?"
	exit 3
}
trap late_write TERM CONT
echo "started $TENURE_HOLDER $TENURE_TOKEN"
while :; do sleep 1 & wait $!; done
`

// fencedWriter makes one fenced write and reports it.
const fencedWriter = `
psql -X -q -v ON_ERROR_STOP=1 -v TENURE_TOKEN="$TENURE_TOKEN" <<'SQL' || exit 1
BEGIN;
SELECT tenure_fence('invoice-run', :'TENURE_TOKEN');
COMMIT;
SQL
echo "wrote $TENURE_TOKEN"
`

// TestRunPausedMachineIsFenced stops tenure and its watchdog, as a pause
// of the whole machine would: what only the fence covers.
func TestRunPausedMachineIsFenced(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	env := s.env(t, s.psqlEnv(t)...)
	flags := []string{"--name", "invoice-run", "--ttl", "3s", "--grace", "1s"}

	a := start(t, env, append(append([]string{"run"}, flags...), "--label", "a", "--", "sh", "-c", lateWriter)...)
	first := atoi(t, a.stdout.await(startedLine)[3])
	b := start(t, env, append(append([]string{"run"}, flags...), "--label", "b", "--wait", "--", "sh", "-c", fencedWriter)...)
	b.stderr.await(`waiting for it$`)

	// A pause of tenure and its watchdog together, as only a whole-machine
	// pause makes one: nothing kills the command, and only the fence
	// refuses its late write.
	dog, group := watchdogOf(t, a), commandOf(t, a)
	require.NoError(t, syscall.Kill(dog, syscall.SIGSTOP))
	a.signal(syscall.SIGSTOP)
	require.NoError(t, syscall.Kill(-group, syscall.SIGSTOP))
	second := atoi(t, b.stdout.await(`^wrote (\d+)$`)[1])
	require.Greater(t, second, first)
	require.Equal(t, 0, b.wait(), b.stderr.all())

	// The machine resumes and the command happens to run first: its write
	// in flight (on SIGCONT here) reaches the resource before anything can
	// kill it.
	require.NoError(t, syscall.Kill(-group, syscall.SIGCONT))
	a.stdout.await(`^late write exit`)
	require.NoError(t, syscall.Kill(dog, syscall.SIGCONT))
	a.signal(syscall.SIGCONT)
	require.Equal(t, cli.ExitLost, a.wait(), a.stderr.all())
	a.stderr.await(fmt.Sprintf(`^tenure: lost lease "invoice-run" with token %d: `, first))
	out := a.stdout.rest()
	require.Contains(t, out, "ERROR:  TF001: tenure: fenced", "the late write was not refused by the fence:\n%s", out)
	require.Contains(t, out, "late write exit 3")

	var recorded int64
	require.NoError(t, s.owner.QueryRow(ctxTimeout(t),
		`SELECT token FROM `+pgx.Identifier{s.schema, "tenure_fences"}.Sanitize()+` WHERE resource = 'invoice-run'`).Scan(&recorded))
	require.Equal(t, second, recorded)
}

func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	for name, sig := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP,
		"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2} {
		t.Run("Trapped"+name, func(t *testing.T) {
			t.Parallel()
			env := sqliteStore(t).env(t)
			sh := fmt.Sprintf(`trap 'echo "got %d"; exit 42' %d; echo ready; while :; do sleep 1 & wait $!; done`, sig, sig)
			p := start(t, env, "run", "--name", "job", "--", "sh", "-c", sh)
			p.stdout.await(`^ready$`)
			p.signal(sig)
			p.stdout.await(fmt.Sprintf(`^got %d$`, sig))
			require.Equal(t, 42, p.wait(), p.stderr.all())
			require.Equal(t, "released", status(t, env, "job").State)
		})
		t.Run("Untrapped"+name, func(t *testing.T) {
			t.Parallel()
			env := sqliteStore(t).env(t)
			p := start(t, env, "run", "--name", "job", "--", "sh", "-c", "echo ready; exec sleep 60")
			p.stdout.await(`^ready$`)
			p.signal(sig)
			require.Equal(t, 128+int(sig), p.wait(), p.stderr.all())
			require.Empty(t, p.stderr.rest())
			require.Equal(t, "released", status(t, env, "job").State)
		})
	}

	t.Run("WhileWaiting", func(t *testing.T) {
		t.Parallel()
		env := sqliteStore(t).env(t)
		a := start(t, env, append([]string{"run", "--name", "job"}, blockingChild...)...)
		a.stdout.await(startedLine)
		b := start(t, env, "run", "--name", "job", "--wait", "--", "sh", "-c", "echo ran")
		b.stderr.await(`waiting for it$`)
		b.signal(syscall.SIGINT)
		require.Equal(t, 128+int(syscall.SIGINT), b.wait())
		require.Contains(t, b.stderr.rest(), "interrupted by interrupt while waiting for lease \"job\"; nothing was run")
		require.Empty(t, b.stdout.rest())
		a.closeStdin()
		require.Equal(t, 0, a.wait())
	})
}

func TestReleaseForceStopsTheHolder(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	env := s.env(t)
	a := start(t, env, append([]string{"run", "--name", "nightly", "--ttl", "3s", "--grace", "500ms", "--label", "a"}, blockingChild...)...)
	m := a.stdout.await(startedLine)
	first := atoi(t, m[3])

	before := status(t, env, "nightly")
	r := run(t, env, "release", "--force", "nightly")
	require.Equal(t, 0, r.code, r.stderr.all())
	require.Contains(t, r.stdout.rest(), fmt.Sprintf("the renewal chain of its holder a/%s with token %d moved on", m[2], first))

	st := status(t, env, "nightly")
	require.Equal(t, "held", st.State, "the lease keeps its expiry: nobody takes it before the holder stood down")
	require.Equal(t, first, st.Token)
	require.Equal(t, "a/"+m[2], st.Holder)
	require.Greater(t, st.Seq, before.Seq, "the holder's chain moved on")

	require.Equal(t, cli.ExitLost, a.wait(), a.stderr.all())
	// "expired at store" unless a loaded machine made the holder see a
	// suspension first: any loss must stop the command.
	a.stderr.await(fmt.Sprintf(`^tenure: lost lease "nightly" with token %d: `, first))

	next := run(t, env, "run", "--name", "nightly", "--wait", "--", "sh", "-c", "echo $TENURE_TOKEN")
	require.Equal(t, 0, next.code, next.stderr.all())
	require.Greater(t, atoi(t, strings.TrimSpace(next.stdout.rest())), first)
}

func TestReleaseOwnFromTheCommand(t *testing.T) {
	t.Parallel()
	env := sqliteStore(t).env(t)
	p := run(t, env, "run", "--name", "nightly", "--", "sh", "-c", `"$TENURE_BIN" release "$TENURE_LEASE"`)
	require.Equal(t, 0, p.code, p.stderr.all())
	require.Equal(t, `released lease "nightly" (token 1)`, p.stdout.rest())
	require.Empty(t, p.stderr.rest())
	require.Equal(t, "released", status(t, env, "nightly").State)

	p = run(t, append(env, cli.EnvHolder+"=someone/else", cli.EnvToken+"=1"), "release", "nightly")
	require.Equal(t, 0, p.code, p.stderr.all())
	require.Contains(t, p.stdout.rest(), `lease "nightly" is not held (released, last token 1)`)
}

func TestStatus(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		env := s.env(t)
		a := start(t, env, append([]string{"run", "--name", "nightly", "--ttl", "30s", "--label", "a"}, blockingChild...)...)
		m := a.stdout.await(startedLine)

		st := status(t, env, "nightly")
		require.Equal(t, "nightly", st.Name)
		require.Equal(t, "held", st.State)
		require.Equal(t, "a/"+m[2], st.Holder)
		require.Equal(t, "a", st.Label)
		require.Equal(t, m[2], st.Instance)
		require.Equal(t, atoi(t, m[3]), st.Token)
		require.Positive(t, st.Seq)
		require.NotNil(t, st.AcquiredAt)
		require.WithinDuration(t, time.Now(), *st.AcquiredAt, time.Minute)
		require.Positive(t, st.ExpiresInMS)
		require.LessOrEqual(t, st.ExpiresInMS, int64(30_000))

		absent := status(t, env, "never")
		require.Equal(t, leaseJSON{Name: "never", State: "absent"}, absent)

		table := run(t, env, "status")
		require.Equal(t, 0, table.code)
		require.Regexp(t, `(?m)^nightly\s+held\s+a/`+m[2]+`\s+`+m[3]+`\s+\S+Z\s+\d`, table.stdout.rest())

		w := start(t, env, "status", "--watch", "--json", "--interval", "50ms", "nightly")
		w.stdout.await(`^\{"leases":\[\{"name":"nightly","state":"held",`)
		w.signal(syscall.SIGINT)
		require.Equal(t, 0, w.wait(), w.stderr.all())
		snapshots := strings.Split(w.stdout.rest(), "\n")
		for _, line := range snapshots {
			var snap struct {
				Leases []leaseJSON `json:"leases"`
			}
			require.NoError(t, json.Unmarshal([]byte(line), &snap), line)
			require.Len(t, snap.Leases, 1)
		}

		a.closeStdin()
		require.Equal(t, 0, a.wait())
	})
}

func TestExitCodes(t *testing.T) {
	t.Parallel()

	t.Run("CommandStatusPassesThrough", func(t *testing.T) {
		t.Parallel()
		env := sqliteStore(t).env(t)
		p := run(t, env, "run", "--name", "job", "--", "sh", "-c", "exit 7")
		require.Equal(t, 7, p.code)
		require.Empty(t, p.stderr.rest())
	})

	t.Run("StdinPassesThrough", func(t *testing.T) {
		t.Parallel()
		env := sqliteStore(t).env(t)
		p := start(t, env, "run", "--name", "job", "--", "sh", "-c", `read line; echo "got $line"`)
		_, err := p.stdin.Write([]byte("hello\n"))
		require.NoError(t, err)
		p.stdout.await(`^got hello$`)
		p.closeStdin()
		require.Equal(t, 0, p.wait())
	})

	t.Run("CommandNotFound", func(t *testing.T) {
		t.Parallel()
		env := sqliteStore(t).env(t)
		p := run(t, env, "run", "--name", "job", "--", "tenure-no-such-command")
		require.Equal(t, cli.ExitNotFound, p.code)
		require.Regexp(t, `^tenure: run: cannot start "tenure-no-such-command": .*; lease "job" released$`, p.stderr.rest())
	})

	t.Run("Usage", func(t *testing.T) {
		t.Parallel()
		env := sqliteStore(t).env(t)
		for _, args := range [][]string{
			{"run", "--name", "job", "--ttl", "2s", "--grace", "5s", "--", "true"},
			{"run", "--name", "job", "--ttl", "2", "--", "true"},
			{"run", "--nmae", "job", "--", "true"},
			{"status", "--store", "mysql://localhost:3306"},
			{"frobnicate"},
		} {
			p := run(t, env, args...)
			require.Equal(t, cli.ExitUsage, p.code, "%q", args)
			require.Regexp(t, `^tenure: [^\n]+$`, p.stderr.rest(), "%q", args)
		}
	})

	t.Run("Unavailable", func(t *testing.T) {
		t.Parallel()
		proxy, err := faultnet.Listen("127.0.0.1:1")
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, proxy.Close()) })
		proxy.Refuse()
		p := run(t, testEnv(t), "run", "--name", "job", "--store", "postgres://u:Sup3rSecret@"+proxy.Addr()+"/db?sslmode=disable", "--", "true")
		require.Equal(t, cli.ExitUnavailable, p.code)
		errs := p.stderr.rest()
		require.Regexp(t, `^tenure: cannot reach PostgreSQL at postgres://u:xxxxx@`, errs)
		require.NotContains(t, errs, "Sup3rSecret")
	})

	t.Run("NotMigrated", func(t *testing.T) {
		t.Parallel()
		owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		schema := testutil.UniqueName(t)
		t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, schema) })
		u := testutil.PostgresURL()
		if strings.Contains(u, "?") {
			u += "&"
		} else {
			u += "?"
		}
		p := run(t, testEnv(t), "run", "--name", "job", "--store", u+storeurl.ParamSchema+"="+schema, "--", "true")
		require.Equal(t, cli.ExitNotMigrated, p.code)
		require.Regexp(t, "^tenure: .*run `tenure migrate`", p.stderr.rest())
	})
}

// TestEmptyStoreRefused: an empty --store, or TENURE_STORE set but empty,
// is refused (exit 64) by run, status and release before anything runs or
// is opened: a misconfigured host does not silently use its own file.
func TestEmptyStoreRefused(t *testing.T) {
	t.Parallel()
	cmds := map[string][]string{
		"run":     {"run", "--name", "nightly", "--", "sh", "-c", "echo ran"},
		"status":  {"status", "nightly"},
		"release": {"release", "--force", "nightly"},
	}
	for name, args := range cmds {
		for _, c := range []struct {
			what string
			env  []string
			args []string
		}{
			{"empty --store", testEnv(t), append(append([]string{}, args[:1]...), append([]string{"--store", ""}, args[1:]...)...)},
			{"blank --store", testEnv(t), append(append([]string{}, args[:1]...), append([]string{"--store", " "}, args[1:]...)...)},
			{"empty " + storeurl.EnvVar, testEnv(t, storeurl.EnvVar+"="), args},
		} {
			p := run(t, c.env, c.args...)
			require.Equal(t, cli.ExitUsage, p.code, "%s with %s: %s", name, c.what, p.stderr.all())
			require.Empty(t, p.stdout.rest(), "%s with %s", name, c.what)
			require.Contains(t, p.stderr.rest(), "empty", "%s with %s", name, c.what)
		}
	}
}

// TestDefaultStoreAnnounced: without --store and TENURE_STORE, run,
// status and release say on stderr that they use this host's SQLite file
// when the call creates it, and only then.
func TestDefaultStoreAnnounced(t *testing.T) {
	t.Parallel()
	const says = `creating the default store sqlite:`
	env := testEnv(t)
	p := run(t, env, "run", "--name", "nightly", "--", "sh", "-c", "echo ran")
	require.Equal(t, 0, p.code, p.stderr.all())
	require.Equal(t, "ran", p.stdout.rest())
	require.Contains(t, p.stderr.rest(), says)
	require.Contains(t, p.stderr.rest(), `pass --store or set TENURE_STORE to share lease "nightly" with other hosts`)
	p = run(t, env, "status", "nightly")
	require.Equal(t, 0, p.code, p.stderr.all())
	require.NotContains(t, p.stderr.rest(), "default store", "said once, when the file was made")
	p = run(t, env, "release", "--force", "nightly")
	require.Equal(t, 0, p.code, p.stderr.all())
	require.Contains(t, p.stdout.rest(), `lease "nightly" is not held`)
	require.NotContains(t, p.stderr.rest(), "default store")

	for _, args := range [][]string{{"status", "nightly"}, {"release", "--force", "nightly"}} {
		p := run(t, testEnv(t), args...)
		require.Contains(t, p.stderr.rest(), says, "%s on a host without the file", args[0])
	}
}
