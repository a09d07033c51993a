package testutil

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

func TestUniqueName(t *testing.T) {
	t.Parallel()
	safe := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	for _, tc := range []struct{ name, want string }{
		{"Simple", "testuniquename_simple"},
		{"With Spaces And/Slashes", "ename_with_spaces_and_slashes"},
		{"Very" + strings.Repeat("Long", 40), "g" + strings.Repeat("long", 7)},
		{"9Digits", "testuniquename_9digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := UniqueName(t), UniqueName(t)
			require.NotEqual(t, a, b)
			for _, n := range []string{a, b} {
				require.Regexp(t, safe, n)
				require.LessOrEqual(t, len(n), 40)
				require.Equal(t, tc.want, n[:len(n)-11], "name %q", n)
				require.Regexp(t, `^_[0-9a-f]{10}$`, n[len(n)-11:])
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"TestX/Sub_Test":  "testx_sub_test",
		"__ABC__":         "abc",
		"123abc":          "abc",
		"äöü":             "",
		"a--b":            "a_b",
		"Test/#01":        "test_01",
		"/leading/slash/": "leading_slash",
	} {
		require.Equal(t, want, sanitize(in), "sanitize(%q)", in)
	}
}

func TestHolder(t *testing.T) {
	t.Parallel()
	a, b := Holder(t, "worker"), Holder(t, "worker")
	require.NoError(t, a.Validate())
	require.Equal(t, "worker", a.Label)
	require.NotEqual(t, a, b)
}

func TestPostgresURL(t *testing.T) {
	t.Setenv("TENURE_TEST_PG_URL", "")
	require.Equal(t, DefaultPostgresURL, PostgresURL())
	t.Setenv("TENURE_TEST_PG_URL", "postgres://elsewhere/db")
	require.Equal(t, "postgres://elsewhere/db", PostgresURL())
}

func TestNeedServer(t *testing.T) {
	t.Run("NilErrorContinues", func(t *testing.T) {
		NeedServer(t, "nothing", nil)
	})
	t.Run("SkipsLocally", func(t *testing.T) {
		t.Setenv("CI", "")
		ran := false
		t.Run("Inner", func(t *testing.T) {
			NeedServer(t, "postgres", errors.New("connection refused"))
			ran = true
		})
		require.False(t, ran, "NeedServer returned instead of stopping the test")
	})
}

func TestNeedServerFailsInCI(t *testing.T) {
	t.Setenv("CI", "true")
	r := &stopRecorder{TB: t}
	returned := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		NeedServer(r, "postgres", errors.New("connection refused"))
		returned = true
	}()
	<-done
	require.False(t, returned, "NeedServer returned instead of stopping the test")
	require.Equal(t, "fatal", r.how, "with CI set, a missing server fails the test; it must not skip")
	require.Contains(t, r.msg, "postgres is unreachable and CI is set: connection refused")
}

// stopRecorder records how a test was stopped (Fatalf or Skipf) and stops
// the calling goroutine, as the testing package does, without ending the
// real test.
type stopRecorder struct {
	testing.TB
	how, msg string
}

func (r *stopRecorder) Fatalf(format string, args ...any) { r.stop("fatal", format, args) }
func (r *stopRecorder) Skipf(format string, args ...any)  { r.stop("skip", format, args) }

func (r *stopRecorder) stop(how, format string, args []any) {
	r.how, r.msg = how, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestNotifications(t *testing.T) {
	t.Parallel()
	n := NewNotifications()
	require.False(t, n.Wait("job", 10*time.Millisecond), "nothing reported yet")
	go n.Notify(store.Notice{Name: "job", Kind: store.NoticeReleased})
	require.True(t, n.Wait("job", 10*time.Second))
	n.Notify(store.Notice{})
	n.Notify(store.Notice{})
	require.Equal(t, 2, n.Count(""))
	require.Equal(t, 1, n.Count("job"))
	require.True(t, n.Wait("", 0), "a name already reported needs no wait")
	require.Equal(t, []store.Notice{{Name: "job", Kind: store.NoticeReleased}}, n.Of("job"))
	require.False(t, n.WaitFor(func(got store.Notice) bool { return got.Kind == store.NoticeAcquired }, 0))
}

func TestReceive(t *testing.T) {
	t.Parallel()
	ch := make(chan int, 1)
	ch <- 7
	require.Equal(t, 7, Receive(t, ch, "a value", time.Second))

	r := &fatalRecorder{TB: t}
	require.Zero(t, Receive(r, ch, "a second value", time.Millisecond))
	require.Equal(t, "no a second value within 1ms", r.msg)
}

// fatalRecorder records Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

func TestRunListener(t *testing.T) {
	t.Parallel()
	r := &errorRecorder{TB: t}
	// Cleanups run last-in first-out: this check runs after both listeners'.
	t.Cleanup(func() {
		require.Equal(t, []string{"Listen returned <nil>, want context.Canceled"}, r.msgs)
	})
	n := NewNotifications()
	RunListener(r, t.Context(), func(ctx context.Context, notify func(store.Notice)) error {
		notify(store.Notice{Name: "good"})
		<-ctx.Done()
		return ctx.Err()
	}, n.Notify, time.Second)
	RunListener(r, t.Context(), func(ctx context.Context, notify func(store.Notice)) error {
		notify(store.Notice{Name: "bad"})
		<-ctx.Done()
		return nil
	}, n.Notify, time.Second)
	require.True(t, n.Wait("good", time.Second))
	require.True(t, n.Wait("bad", time.Second))
}

// errorRecorder records Errorf instead of failing the test.
type errorRecorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *errorRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
