package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/PID/stat (USER_HZ),
// 100 a second on every Linux architecture Go supports.
const clockTicks = 100

// serverCPU returns the CPU time used so far by every process of the
// server named comm ("postgres": the postmaster and all its children) on
// this machine, read from /proc. A process that exits between two
// readings takes its time with it, so a difference of two readings counts
// the processes that lived through both: the server's own and the
// connections that stay open.
func serverCPU(comm string) (time.Duration, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	var ticks int64
	found := false
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process has exited
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses,
		// so the fields are counted from the last ')'.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != comm {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		// After comm: state is field 3 of the line, utime 14, stime 15.
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		ticks += u + st
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no %q process on this machine (is the server elsewhere?)", comm)
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// selfCPU returns the CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// localURL reports whether a database URL's host is this machine's
// loopback, where the server's processes can be read.
func localURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
