package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// globalFlags are the flags every command takes, before its name
// (tenure -v run …) or among its own flags (tenure run -v …).
type globalFlags struct {
	verbose bool
	format  logFormat
}

// Names of the global flags.
const (
	flagVerbose   = "v"
	flagLogFormat = "log-format"
)

func (g *globalFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&g.verbose, flagVerbose, g.verbose, "log the lease client's acquisitions and releases too (level info); without it only warnings and errors are logged")
	fs.Var(&g.format, flagLogFormat, "`FORMAT` of the log lines on standard error: text or json (default text)")
}

// parseGlobal takes the global flags off the front of args and returns
// the rest, beginning with the command name.
func (g *globalFlags) parseGlobal(args []string) ([]string, error) {
	n := 0
	for n < len(args) {
		arg := args[n]
		name, _, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(arg, "-") || (name != flagVerbose && name != flagLogFormat) {
			break
		}
		if len(name) > 1 && !strings.HasPrefix(arg, "--") {
			return nil, usagef("", "%s", longFlagMessage(arg))
		}
		n++
		if name == flagLogFormat && !hasValue {
			n++ // its value follows
		}
	}
	n = min(n, len(args))
	fs := flag.NewFlagSet("tenure", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.define(fs)
	if err := fs.Parse(args[:n]); err != nil {
		return nil, usagef("", "%s", flagMessage(err))
	}
	return args[n:], nil
}

// logger returns the logger the flags ask for, writing to w: warnings and
// errors, and with -v information too.
func (g *globalFlags) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelWarn}
	if g.verbose {
		opts.Level = slog.LevelInfo
	}
	if g.format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// reports returns the logger for a command's own progress reports (such
// as run --wait's holder changes) when the flags ask for log records, at
// level info; nil when they do not, and the reports are plain lines.
func (g *globalFlags) reports(w io.Writer) *slog.Logger {
	if !g.verbose && g.format != "json" {
		return nil
	}
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if g.format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// logFormat is the value of --log-format.
type logFormat string

func (f *logFormat) String() string { return string(*f) }

// Words are the log formats, for shell completion.
func (f *logFormat) Words() []string { return []string{"json", "text"} }

func (f *logFormat) Set(s string) error {
	switch s {
	case "json", "text":
		*f = logFormat(s)
		return nil
	}
	return fmt.Errorf("%q is not a log format; use json or text", s)
}

// syncWriter serialises writes to w: log lines come from the lease
// client's goroutine, messages from the command's.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
