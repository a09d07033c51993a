package supervise

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// NoCgroupEnv, set to anything but empty, makes tenure run do without a
// cgroup (child subreaper and task scan only): for tests of that mode,
// and for hosts where tenure must not create cgroups.
const NoCgroupEnv = "TENURE_RUN_NO_CGROUP"

// cgroupEnv names the command's cgroup directory to the watchdog.
const cgroupEnv = "TENURE_WATCHDOG_CGROUP"

// NoCgroupV2Env, set to anything but empty, makes tenure run pass over
// cgroup v2 and use the cgroup v1 freezer hierarchy where that is mounted:
// for tests of the cgroup v1 mode on a host that has both.
const NoCgroupV2Env = "TENURE_RUN_NO_CGROUP_V2"

// Cgroup is a cgroup directory, of cgroup v2 or of the cgroup v1
// freezer hierarchy, that holds one command's tree and nothing else:
// every process the command starts is born in it, whatever it does with
// its session, its process group or its main thread.
type Cgroup struct {
	// Dir is the cgroup's directory, under the cgroup2 mount or the
	// cgroup v1 freezer's.
	Dir string
	// rel is its path within the hierarchy, as /proc/PID/cgroup shows it.
	rel string
	// v1: a cgroup of the cgroup v1 freezer hierarchy, not of cgroup v2.
	v1 bool
	// spare is a process never signalled though a thread of it may be in
	// the cgroup: the supervisor, which forks the command from a thread
	// it moves in for the fork in cgroup v1 (see [Cgroup.Start]).
	spare int
}

// cgroupMount returns where the cgroup v2 hierarchy is mounted and the
// hierarchy path it mounts, from mountinfo (lines "ID PARENT MAJ:MIN ROOT
// MOUNTPOINT OPTS... - FSTYPE ...").
func cgroupMount(mountinfo string) (point, root string, ok bool) {
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, found := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if found && len(f) >= 5 && len(g) >= 1 && g[0] == "cgroup2" {
			return unescapeMount(f[4]), unescapeMount(f[3]), true
		}
	}
	return "", "", false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unifiedPath returns the cgroup v2 path in a /proc/PID/cgroup text (its
// "0::PATH" line).
func unifiedPath(cgroup string) (string, bool) {
	for _, line := range strings.Split(cgroup, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, true
		}
	}
	return "", false
}

// parent is where a command's cgroup is made: the calling process's own
// cgroup in the hierarchy tenure run uses.
type parent struct {
	dir string // its directory
	rel string // its path within the hierarchy
	v1  bool   // the cgroup v1 freezer hierarchy, not cgroup v2
}

// cgroupParent returns the calling process's own cgroup under which a
// command's cgroup is made, in cgroup v2 where it can be written, else in
// the cgroup v1 freezer hierarchy; or why there is none that this process
// can use.
func cgroupParent() (parent, error) {
	if os.Getenv(NoCgroupEnv) != "" {
		return parent{}, fmt.Errorf("%s is set", NoCgroupEnv)
	}
	return findParent(os.Getenv(NoCgroupV2Env) != "")
}

// findParent is [cgroupParent] without the environment: skipV2 passes
// over cgroup v2.
func findParent(skipV2 bool) (parent, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return parent{}, fmt.Errorf("cannot read /proc/self/mountinfo: %w", err)
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return parent{}, fmt.Errorf("cannot read /proc/self/cgroup: %w", err)
	}
	why2 := fmt.Errorf("cgroup v2 passed over: %s is set", NoCgroupV2Env)
	if !skipV2 {
		p, err := v2Parent(string(mi), string(own))
		if err == nil {
			return p, nil
		}
		why2 = err
	}
	p, why1 := freezerParent(string(mi), string(own))
	if why1 == nil {
		return p, nil
	}
	return parent{}, fmt.Errorf("%w; %w", why2, why1)
}

// v2Parent returns the calling process's cgroup v2, from its mountinfo and
// /proc/self/cgroup.
func v2Parent(mountinfo, own string) (parent, error) {
	point, root, ok := cgroupMount(mountinfo)
	if !ok {
		return parent{}, errors.New("no cgroup v2 hierarchy is mounted")
	}
	rel, ok := unifiedPath(own)
	if !ok {
		return parent{}, errors.New("this process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)")
	}
	dir, err := writableParent(point, root, rel, "cgroup.procs")
	if err != nil {
		return parent{}, fmt.Errorf("%w (run as root, or in a delegated cgroup v2 subtree, e.g. systemd Delegate=yes)", err)
	}
	return parent{dir: dir, rel: rel}, nil
}

// writableParent returns the directory of cgroup rel in the hierarchy
// whose root is mounted at point, if this process can make cgroups in it
// and move processes (by the file procs).
func writableParent(point, root, rel, procs string) (string, error) {
	sub, err := filepath.Rel(root, rel)
	if err != nil || strings.HasPrefix(sub, "..") {
		return "", fmt.Errorf("this process's cgroup %s is outside the mount at %s", rel, point)
	}
	dir := filepath.Join(point, sub)
	if unix.Access(dir, unix.W_OK) != nil || unix.Access(filepath.Join(dir, procs), unix.W_OK) != nil {
		return "", fmt.Errorf("cannot write to this process's cgroup %s", dir)
	}
	return dir, nil
}

// CgroupParent returns the directory under which tenure run makes its
// command's cgroup: the calling process's own cgroup v2, or its cgroup v1
// freezer cgroup; or why there is none it can use.
func CgroupParent() (string, error) {
	p, err := cgroupParent()
	return p.dir, err
}

// Mode reports whether tenure run puts its command in a cgroup on this
// host, and says how it supervises: where the cgroups go, or why there is
// none.
func Mode() (cgroup bool, how string) {
	p, err := cgroupParent()
	if err != nil {
		return false, "child subreaper and task scan (no cgroup: " + err.Error() + ")"
	}
	if p.v1 {
		return true, "cgroup v1 freezer (each command in a freezer cgroup of its own under " + p.dir + ", killed frozen by SIGKILL to each process in it, waited for until its tasks are empty) and child subreaper"
	}
	kill := "cgroup.kill and SIGKILL to each process in it"
	if !kernelAtLeast(5, 14) {
		kill = "SIGKILL to each process in it, frozen (no cgroup.kill before Linux 5.14)"
	}
	return true, "cgroup v2 (each command in a cgroup of its own under " + p.dir + ", killed by " + kill + ", waited for until empty) and child subreaper"
}

// kernelAtLeast reports whether the running kernel's version is at least
// major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return versionAtLeast(unix.ByteSliceToString(u.Release[:]), major, minor)
}

// versionAtLeast reports whether a release such as "6.18.44-fc" is at
// least major.minor.
func versionAtLeast(release string, major, minor int) bool {
	f := strings.SplitN(release, ".", 3)
	if len(f) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(f[0])
	mnr, err2 := strconv.Atoi(strings.TrimRightFunc(f[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > major || (maj == major && mnr >= minor)
}

// NewCgroup makes the cgroup for one command, named name, under the
// calling process's own cgroup (see [Mode]).
func NewCgroup(name string) (*Cgroup, error) {
	p, err := cgroupParent()
	if err != nil {
		return nil, err
	}
	return p.newCgroup(name)
}

func (p parent) newCgroup(name string) (*Cgroup, error) {
	dir := filepath.Join(p.dir, name)
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrExist) && unix.Rmdir(dir) == nil {
		// Left behind, empty, by a run of the same pid that died with its
		// watchdog; a populated one cannot be removed and is not reused.
		err = os.Mkdir(dir, 0o755)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot make cgroup %s: %w", dir, err)
	}
	return &Cgroup{Dir: dir, rel: filepath.Join(p.rel, name), v1: p.v1}, nil
}

// OpenCgroup returns the cgroup at dir, made by [NewCgroup] in another
// process, or false when dir is under neither the cgroup v2 mount nor the
// cgroup v1 freezer's. The cgroup may be gone already (removed once
// empty): it then holds nothing.
func OpenCgroup(dir string) (*Cgroup, bool) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || !filepath.IsAbs(dir) {
		return nil, false
	}
	for _, v1 := range []bool{false, true} {
		point, root, ok := cgroupMount(string(mi))
		if v1 {
			point, root, ok = freezerMount(string(mi))
		}
		sub, err := filepath.Rel(point, dir)
		if ok && err == nil && !strings.HasPrefix(sub, "..") {
			return &Cgroup{Dir: dir, rel: filepath.Join(root, sub), v1: v1}, true
		}
	}
	return nil, false
}

// Open opens the cgroup's directory, for SysProcAttr.CgroupFD: a process
// cloned into it (CLONE_INTO_CGROUP) is in it from its first instruction.
// Cgroup v2 only; see [Cgroup.Start].
func (c *Cgroup) Open() (*os.File, error) {
	return os.OpenFile(c.Dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
}

// Start starts cmd in the cgroup: it is in it from its first instruction,
// so it never runs outside. In cgroup v2 it is cloned into it
// (CLONE_INTO_CGROUP); in cgroup v1, forked by a thread moved into it for
// the fork (see [Cgroup.startV1]).
func (c *Cgroup) Start(cmd *exec.Cmd) error {
	if c.v1 {
		return c.startV1(cmd)
	}
	dir, err := c.Open()
	if err != nil {
		return err
	}
	defer func() { _ = dir.Close() }() // The child has its own reference.
	if err := cloneInto(cmd, dir); err != nil {
		return err
	}
	return cmd.Start()
}

// Procs returns the processes in the cgroup and in any cgroup the command
// made below it (each cgroup.procs), a process whose main thread exited
// while others run among them.
func (c *Cgroup) Procs() []int {
	var pids []int
	for _, dir := range c.dirs() {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")) // Also in cgroup v1.
		if err != nil {
			continue // Removed in between: empty.
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// dirs returns the cgroup's directory and those below it, each parent
// before its children.
func (c *Cgroup) dirs() []string {
	var dirs []string
	_ = filepath.WalkDir(c.Dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil // A cgroup removed during the walk holds nothing.
	})
	return dirs
}

// Populated reports whether any process is left in the cgroup
// (cgroup.events says "populated 1"; in cgroup v1, a task is listed in
// tasks); a cgroup that is gone is empty.
func (c *Cgroup) Populated() bool {
	if c.v1 {
		return c.tasksLeft()
	}
	b, err := os.ReadFile(filepath.Join(c.Dir, "cgroup.events"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return strings.TrimSpace(v) != "0"
		}
	}
	return len(c.Procs()) > 0
}

// Signal sends sig to every process in the cgroup and returns how many it
// reached. Each is signalled through a pidfd opened before its membership
// is checked, so a pid reused by a process outside the cgroup is never
// hit. The calling process and c.spare are not signalled.
func (c *Cgroup) Signal(sig syscall.Signal) int {
	n := 0
	self := os.Getpid()
	for _, pid := range c.Procs() {
		if pid == self || pid == c.spare {
			continue
		}
		if signalPidfd(pid, sig, c.holds) {
			n++
		}
	}
	return n
}

// holds reports whether process pid is in the cgroup or below it: any
// thread of it, by /proc/PID/cgroup or, when its main thread has exited,
// a thread's.
func (c *Cgroup) holds(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid)
	paths := []string{dir + "/cgroup"}
	tasks, _ := filepath.Glob(dir + "/task/*/cgroup")
	for _, p := range append(paths, tasks...) {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		rel, ok := unifiedPath(string(b))
		if c.v1 {
			rel, ok = freezerPath(string(b))
		}
		if ok && (rel == c.rel || strings.HasPrefix(rel, c.rel+"/")) {
			return true
		}
	}
	return false
}

// Kill kills every process in the cgroup: it freezes the cgroup (no more
// forks), writes cgroup.kill, and sends SIGKILL to each process listed,
// since cgroup.kill passes over a process whose main thread has exited
// (seen on Linux 6.18); in cgroup v1, see [Cgroup.killV1]. It returns how
// many processes it signalled.
func (c *Cgroup) Kill() int {
	if c.v1 {
		return c.killV1()
	}
	_ = os.WriteFile(filepath.Join(c.Dir, "cgroup.freeze"), []byte("1"), 0) // Before 5.2: no freezer; the rounds below still catch forks.
	_ = os.WriteFile(filepath.Join(c.Dir, "cgroup.kill"), []byte("1"), 0)   // Before 5.14: no cgroup.kill; each is killed below.
	return c.Signal(syscall.SIGKILL)
}

// Remove removes the cgroup, and any the command made below it, once
// empty, waiting up to wait for the last processes to leave; a cgroup
// already gone is no error.
func (c *Cgroup) Remove(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		dirs := c.dirs()
		for i := len(dirs) - 1; i > 0; i-- {
			_ = unix.Rmdir(dirs[i]) // Busy: the loop tries again; the last error is c.Dir's.
		}
		err := unix.Rmdir(c.Dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cannot remove cgroup %s: %w", c.Dir, err)
		}
		time.Sleep(10 * time.Millisecond) // The kernel lets the last exits settle.
	}
}
