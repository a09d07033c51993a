package supervise

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Messages from the supervisor to the watchdog: 16 bytes, a kind and a
// value, little-endian.
const (
	msgGroup    = 1 // value: the command's process group
	msgDeadline = 2 // value: the kill deadline, CLOCK_MONOTONIC nanoseconds
	msgDisarm   = 3 // the tree is gone; exit without killing
	msgRoot     = 4 // value: the pid whose descendants make the tree
	msgLeader   = 5 // value: the start time of the group's leader (msgGroup follows)
	msgStopping = 6 // value: the deadline by which tenure run, stopping the tree itself, kills it
)

// WatchdogFD is the descriptor on which the watchdog reads its messages.
const WatchdogFD = 3

// scanEvery is how often the watchdog notes the processes of the tree, so
// that it still knows them after the supervisor died and they were
// re-parented elsewhere.
const scanEvery = 100 * time.Millisecond

// Now reads CLOCK_MONOTONIC in nanoseconds: the clock both the supervisor
// and the watchdog read deadlines on.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("supervise: clock_gettime(CLOCK_MONOTONIC): %v", err)) // cannot fail on Linux
	}
	return ts.Nano()
}

// Dog is the supervisor's end of a watchdog.
type Dog struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returned
	werr   error         // cmd.Wait's error, once exited is closed
	w      *os.File
	mu     sync.Mutex
	last   int64 // the last deadline sent
	err    error // the first failed write
}

// StartDog starts the watchdog as exe args, with the read end of a pipe
// as descriptor [WatchdogFD], in a process group of its own (so terminal
// signals do not reach it), writing its one line to stderr. The watchdog
// watches the calling process's tree, and the cgroup cg unless it is nil:
// call it before starting the command.
func StartDog(exe string, args []string, cg *Cgroup, stderr io.Writer) (*Dog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	me, ok := Identify(os.Getpid())
	if !ok {
		_, _ = r.Close(), w.Close()
		return nil, errors.New("cannot read this process's own /proc entry")
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), supervisorEnv+"="+me.String())
	if cg != nil {
		cmd.Env = append(cmd.Env, cgroupEnv+"="+cg.Dir)
	}
	cmd.ExtraFiles = []*os.File{r}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = r.Close() // The watchdog has its own copy.
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	d := &Dog{cmd: cmd, w: w, exited: make(chan struct{})}
	go func() {
		d.werr = cmd.Wait()
		close(d.exited)
	}()
	return d, nil
}

// Fired reports whether the watchdog killed the tree and exited, waiting
// for its exit at most wait.
func (d *Dog) Fired(wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-d.exited:
		return d.cmd.ProcessState.ExitCode() == ExitFired
	case <-t.C:
		return false
	}
}

// Pid returns the watchdog's process id.
func (d *Dog) Pid() int { return d.cmd.Process.Pid }

func (d *Dog) send(kind, value int64) error {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(kind))
	binary.LittleEndian.PutUint64(b[8:], uint64(value))
	_, err := d.w.Write(b[:])
	if err != nil && d.err == nil {
		d.err = err
	}
	return err
}

// Root tells the watchdog whose descendants make the tree; by default its
// parent's (the supervisor's, when it is a subreaper).
func (d *Dog) Root(pid int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.send(msgRoot, int64(pid))
}

// Group tells the watchdog the command's process group, led by leader:
// the command, as itself, which the watchdog kills with its group and
// descendants even if the supervisor dies before the watchdog has looked
// at the tree.
func (d *Dog) Group(leader Proc) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.send(msgLeader, int64(leader.Start)); err != nil {
		return err
	}
	return d.send(msgGroup, int64(leader.Pid))
}

// Deadline tells the watchdog to kill the tree at deadline (CLOCK_MONOTONIC
// nanoseconds, see [Now]) unless a later deadline comes first.
func (d *Dog) Deadline(deadline int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.last = deadline
	return d.send(msgDeadline, deadline)
}

// Stopping tells the watchdog that the supervisor decided to stop the
// tree itself and kills it by deadline, moving the deadline earlier if it
// is later now; it returns the deadline in force. The watchdog still
// kills the tree at that deadline, as a backstop, but does not blame
// tenure for it: the decision was tenure's (until a fresh [Dog.Deadline]
// makes the deadline a renewal's again).
func (d *Dog) Stopping(deadline int64) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == 0 || deadline < d.last {
		d.last = deadline
	}
	_ = d.send(msgStopping, d.last) // A dead watchdog: nothing else to tell.
	return d.last
}

// ExitFired is the watchdog's exit code when it killed the tree.
const ExitFired = 3

// Disarm tells the watchdog that the tree is gone and waits for it to
// exit. It reports whether the watchdog had fired (killed the tree)
// before. A watchdog that could not be told kills the group it knows when
// the pipe closes, which is harmless once the tree is gone.
func (d *Dog) Disarm() (fired bool, err error) {
	d.mu.Lock()
	err = d.send(msgDisarm, 0)
	_ = d.w.Close() // The watchdog reads EOF after the disarm message.
	d.mu.Unlock()
	<-d.exited
	if d.cmd.ProcessState.ExitCode() == ExitFired {
		return true, nil
	}
	if d.werr != nil && err == nil {
		err = d.werr
	}
	return false, err
}

// RunWatchdog is the watchdog process: it reads messages from
// [WatchdogFD] and kills the tree of its parent (the supervisor, whose
// child it is), and the command's cgroup when it has one, at the deadline
// or when the pipe closes without a disarm; it then removes the cgroup.
// It says why in one line on stderr, but for a deadline by which tenure
// run said it kills the tree itself ([Dog.Stopping]): that kill is
// tenure's decision, which tenure reports. It returns the process's exit
// code.
func RunWatchdog(stderr io.Writer) int {
	// Only SIGKILL ends the watchdog: it must outlive a supervisor that is
	// interrupted, and terminal signals must not stop it.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGUSR1, syscall.SIGUSR2,
		syscall.SIGPIPE, syscall.SIGWINCH, RevokeSignal)
	// The supervisor names itself, pid and start time: by the time this
	// process runs, the one that started it may have died, and this one
	// been re-parented to a stranger whose tree is not ours.
	sup, err := parseSupervisor(os.Getenv(supervisorEnv))
	if err != nil {
		fmt.Fprintf(stderr, "tenure: watchdog: %v\n", err)
		return 2
	}
	parent := sup.Pid
	cg, err := watchdogCgroup(sup)
	if err != nil {
		fmt.Fprintf(stderr, "tenure: watchdog: %v\n", err)
		return 2
	}
	// root is whose descendants make the tree: the supervisor, or the
	// process it names, as itself (a pid that died may name a stranger).
	root := sup
	self := os.Getpid()
	in := os.NewFile(WatchdogFD, "watchdog")
	if in == nil {
		fmt.Fprintln(stderr, "tenure: watchdog: no pipe on descriptor 3")
		return 2
	}
	msgs := readMessages(in)
	var (
		leader      Proc // the command, which leads its process group
		leaderStart uint64
		stopping    bool // the deadline is one by which tenure run kills the tree itself
		known       = map[int]Proc{}
		timer       = time.NewTimer(time.Duration(1<<63 - 1))
		scan        = time.NewTicker(scanEvery)
	)
	note := func() {
		for pid, p := range known {
			if !p.Alive() {
				delete(known, pid)
			}
		}
		if os.Getppid() != parent {
			return // The supervisor is gone: its tree is no longer under it.
		}
		if leader.Pid == 0 || !root.Alive() {
			return // No command yet (its group comes last), or no tree.
		}
		for _, pid := range Descendants(root.Pid, self) {
			if p, ok := Identify(pid); ok {
				known[pid] = p
			}
		}
	}
	var why string
loop:
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				why = "tenure exited without stopping its command"
				break loop
			}
			switch m.kind {
			case msgLeader:
				leaderStart = uint64(m.value)
			case msgGroup:
				leader = Proc{Pid: int(m.value), Start: leaderStart}
				known[leader.Pid] = leader
				note()
			case msgRoot:
				root, _ = Identify(int(m.value))
				note()
			case msgStopping, msgDeadline:
				stopping = m.kind == msgStopping
				timer.Reset(time.Duration(m.value - Now()))
			case msgDisarm:
				return 0
			}
		case <-scan.C:
			note()
		case <-timer.C:
			if !stopping {
				why = "the kill deadline passed without a renewal from tenure (tenure stopped answering: stopped, or not scheduled)"
			}
			break loop
		}
	}
	if os.Getppid() != parent || leader.Pid == 0 {
		// The tree is no longer under the supervisor's pid, or the
		// command never started and there is no tree.
		root = Proc{}
	}
	fire(stderr, why, leader, root, TreeEnv+"="+sup.String(), self, known, cg)
	return ExitFired
}

// fire kills the tree (see [killAll]), removes the cgroup cg, and says
// why on stderr, unless why is empty: tenure run decided the kill itself
// and said so, the watchdog only backing it up at its deadline.
func fire(stderr io.Writer, why string, leader, root Proc, mark string, self int, known map[int]Proc, cg *Cgroup) {
	n := killAll(leader, root, mark, self, known, cg)
	what := "the command's process group"
	if cg != nil {
		what = "the command's cgroup, its process group"
		if err := cg.Remove(time.Second); err != nil {
			fmt.Fprintf(stderr, "tenure: watchdog: %v\n", err)
		}
	}
	if why != "" {
		fmt.Fprintf(stderr, "tenure: watchdog: %s; killed %s and %d processes of its tree\n", why, what, n)
	}
}

// message is one message from the supervisor: a kind and a value.
type message struct{ kind, value int64 }

// readMessages reads the supervisor's messages from in until it fails
// (EOF when the supervisor closed its end or died), then closes the
// channel.
func readMessages(in io.Reader) <-chan message {
	msgs := make(chan message, 16)
	go func() {
		defer close(msgs)
		var b [16]byte
		for {
			if _, err := io.ReadFull(in, b[:]); err != nil {
				return
			}
			msgs <- message{int64(binary.LittleEndian.Uint64(b[:8])), int64(binary.LittleEndian.Uint64(b[8:]))}
		}
	}()
	return msgs
}

// watchdogCgroup returns the command's cgroup that the supervisor sup
// names in the environment, or nil when it names none.
func watchdogCgroup(sup Proc) (*Cgroup, error) {
	dir := os.Getenv(cgroupEnv)
	if dir == "" {
		return nil, nil
	}
	cg, ok := OpenCgroup(dir)
	if !ok {
		return nil, fmt.Errorf("%s=%q is under neither the cgroup v2 mount nor the cgroup v1 freezer's; the watchdog is started by tenure run, not by hand", cgroupEnv, dir)
	}
	cg.spare = sup.Pid // In cgroup v1, a thread of it is in the cgroup while it starts the command.
	return cg, nil
}

// supervisorEnv names the supervisor to its watchdog: "PID:STARTTIME".
const supervisorEnv = "TENURE_WATCHDOG_SUPERVISOR"

// TreeEnv marks every process of a command's tree with its supervisor
// ("PID:STARTTIME"): the supervisor puts it in the command's environment,
// and the command's descendants inherit it. When the supervisor dies
// before its watchdog has seen the whole tree, orphans it never saw (a
// setsid escapee re-parented elsewhere) are found by the mark. A process
// that clears its environment loses it; the process group and the
// descendants seen earlier are killed still.
const TreeEnv = "TENURE_RUN_TREE"

// TreeMark returns the mark of the calling supervisor's command tree, as an
// environment entry.
func TreeMark() (string, error) {
	me, ok := Identify(os.Getpid())
	if !ok {
		return "", errors.New("cannot read this process's own /proc entry")
	}
	return TreeEnv + "=" + me.String(), nil
}

// String returns "PID:STARTTIME".
func (p Proc) String() string { return fmt.Sprintf("%d:%d", p.Pid, p.Start) }

// Marked returns the processes whose environment holds the entry mark.
func Marked(mark string) []Proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if !slices.Contains(Environ(pid), mark) {
			continue
		}
		if p, ok := Identify(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// Environ returns the environment of process pid. When its main thread has
// exited, /proc/PID/environ reads empty while its other threads run with
// the same environment: then the first thread's that can be read.
func Environ(pid int) []string {
	dir := "/proc/" + strconv.Itoa(pid)
	if env, err := os.ReadFile(dir + "/environ"); err == nil && len(env) > 0 {
		return strings.Split(string(env), "\x00")
	}
	tasks, _ := os.ReadDir(dir + "/task")
	for _, t := range tasks {
		if env, err := os.ReadFile(dir + "/task/" + t.Name() + "/environ"); err == nil && len(env) > 0 {
			return strings.Split(string(env), "\x00")
		}
	}
	return nil
}

func parseSupervisor(v string) (Proc, error) {
	pid, start, ok := strings.Cut(v, ":")
	p, err1 := strconv.Atoi(pid)
	t, err2 := strconv.ParseUint(start, 10, 64)
	if !ok || err1 != nil || err2 != nil || p <= 0 {
		return Proc{}, fmt.Errorf("%s=%q does not name the supervisor as PID:STARTTIME; the watchdog is started by tenure run, not by hand", supervisorEnv, v)
	}
	return Proc{Pid: p, Start: t}, nil
}

// killAll SIGKILLs the cgroup cg (when not nil), leader's group, the
// processes in known, those whose environment carries mark (see
// [TreeEnv]) and every descendant of them (and of root while it is alive
// as itself), round after round, until none is left alive and cg is
// empty. It returns how many processes it signalled.
func killAll(leader, root Proc, mark string, self int, known map[int]Proc, cg *Cgroup) int {
	killed := map[Proc]bool{}
	for round := 0; round < 500; round++ {
		populated := false
		if cg != nil {
			for _, pid := range cg.Procs() {
				if p, ok := Identify(pid); ok {
					killed[p] = true
				}
			}
			cg.Kill()
			populated = cg.Populated()
		}
		SignalGroup(leader, syscall.SIGKILL)
		targets := map[int]Proc{}
		for pid, p := range known {
			targets[pid] = p
		}
		for _, p := range Marked(mark) {
			if p.Pid != self {
				targets[p.Pid] = p
			}
		}
		roots := []int{}
		if root.Alive() {
			roots = append(roots, root.Pid)
		}
		for pid, p := range known {
			// Only a known process still alive as itself: the pid of one
			// that died may belong to anyone by now (pids wrap quickly
			// on a busy host), and its children are not ours to kill.
			if p.Alive() {
				roots = append(roots, pid)
			}
		}
		for _, r := range roots {
			for _, pid := range Descendants(r, self) {
				if p, ok := Identify(pid); ok {
					targets[pid] = p
				}
			}
		}
		alive := 0
		for pid, p := range targets {
			if !p.Alive() {
				continue
			}
			alive++
			known[pid] = p
			killed[p] = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if alive == 0 && !populated && round > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // Let the kernel deliver before the next look.
	}
	return len(killed)
}
