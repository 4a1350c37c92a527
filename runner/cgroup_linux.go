package runner

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxFree bounds how many idle cgroups a pool keeps for reuse.
const maxFree = 64

// poolSeq numbers the pools of this process.
var poolSeq atomic.Uint64

// cgroup is one cgroup of a pool, with its directory held open for
// CLONE_INTO_CGROUP.
type cgroup struct {
	dir   string
	fd    int
	procs int // cgroup.procs, held open: reading it again costs less than opening it
	// killed records a write to cgroup.kill. Such a cgroup is never reused:
	// Linux (seen on 6.18) kills at birth every process started into a
	// cgroup with CLONE_INTO_CGROUP once cgroup.kill has been written there,
	// even long after, when the cgroup was empty (the clone compares the
	// cgroup's kill counter with the parent's cgroup's one).
	killed bool
}

// OpenCgroups creates a pool of cgroups in a new directory under parent,
// which must be a writable directory of a cgroup v2 hierarchy. It checks
// that the kernel can start a process inside a cgroup and kill a cgroup
// (Linux 5.14 or later) and returns an error wrapping ErrNoCgroups if not.
// Empty pool directories left by processes that no longer exist are
// removed on the way. Close the pool when done with it.
func OpenCgroups(parent string) (*Cgroups, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroups, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, fmt.Errorf("%w: %s is not in a cgroup v2 hierarchy", ErrNoCgroups, parent)
	}
	removeStalePools(parent)
	root := filepath.Join(parent, fmt.Sprintf("agentexec-%d-%d", os.Getpid(), poolSeq.Add(1)))
	if err := os.Mkdir(root, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%w: cannot create a cgroup in %s: %v", ErrNoCgroups, parent, err)
	}
	c := &Cgroups{parent: parent, root: root}
	cg, err := c.get()
	if err != nil {
		os.Remove(root)
		return nil, fmt.Errorf("%w: cannot create a cgroup in %s: %v", ErrNoCgroups, root, err)
	}
	if _, err := os.Stat(filepath.Join(cg.dir, "cgroup.kill")); err != nil {
		c.release(cg, true)
		c.Close()
		return nil, fmt.Errorf("%w: the kernel has no cgroup.kill (Linux 5.14 or later is needed)", ErrNoCgroups)
	}
	if err := probeClone(cg.fd); err != nil {
		c.release(cg, true)
		c.Close()
		return nil, fmt.Errorf("%w: cannot start a process inside a cgroup of %s: %v", ErrNoCgroups, parent, err)
	}
	c.release(cg, true)
	return c, nil
}

// probeClone starts a process inside the cgroup fd refers to, asking it to
// execute a path that cannot exist: ENOTDIR comes from the exec, which
// runs only after the clone into the cgroup succeeded.
func probeClone(fd int) error {
	_, err := syscall.ForkExec("/dev/null/agentexec-probe", []string{"probe"}, &syscall.ProcAttr{
		Env: []string{},
		Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd},
	})
	if errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err == nil {
		return errors.New("the probe unexpectedly started")
	}
	return err
}

// FindCgroups opens a pool under this process's own cgroup v2 directory
// (from /proc/self/cgroup and /proc/self/mountinfo). It fails, wrapping
// ErrNoCgroups, where there is no cgroup v2 hierarchy or that directory
// is not writable, which is usual for unprivileged processes outside a
// delegated cgroup (systemd-run --user --scope -p Delegate=yes makes one).
func FindCgroups() (*Cgroups, error) {
	rel, err := ownCgroup()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroups, err)
	}
	mount, err := cgroup2Mount(rel)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroups, err)
	}
	return OpenCgroups(mount)
}

// ownCgroup returns this process's path in the cgroup v2 hierarchy.
func ownCgroup() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rel, ok := strings.CutPrefix(line, "0::"); ok {
			if strings.Contains(rel, "/..") {
				return "", errors.New("this process's cgroup is outside its cgroup namespace")
			}
			return rel, nil
		}
	}
	return "", errors.New("this process is in no cgroup v2 hierarchy")
}

// cgroup2Mount returns the directory where cgroup v2 path rel is mounted.
func cgroup2Mount(rel string) (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	return findCgroup2Mount(f, rel)
}

// findCgroup2Mount reads mountinfo lines from r and returns the directory
// where cgroup v2 path rel appears.
func findCgroup2Mount(r io.Reader, rel string) (string, error) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 4096), 1<<20)
	for s.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(s.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		root, point := unescapeMount(f[3]), unescapeMount(f[4])
		if rel == root || root == "/" || strings.HasPrefix(rel, root+"/") {
			return filepath.Join(point, strings.TrimPrefix(rel, strings.TrimSuffix(root, "/"))), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no cgroup v2 hierarchy is mounted")
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

// removeStalePools ends what pools of processes that no longer exist left
// behind. A run's cgroup ("r<n>") that still holds processes belonged to
// a host that died while the command ran (SIGKILL, a crash): they are
// killed and the cgroup removed. Cgroups of leftovers a run deliberately
// kept ("k<n>") stay while they hold processes.
func removeStalePools(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "agentexec-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if subs, err := os.ReadDir(dir); err == nil {
			for _, s := range subs {
				if !s.IsDir() {
					continue
				}
				sub := filepath.Join(dir, s.Name())
				if strings.HasPrefix(s.Name(), "r") {
					endStale(sub)
				}
				unix.Rmdir(sub)
			}
		}
		unix.Rmdir(dir)
	}
}

// endStale kills everything in the cgroup dir and waits, a bounded time,
// until it is empty.
func endStale(dir string) {
	cg := &cgroup{dir: dir, fd: -1, procs: -1}
	for deadline := time.Now().Add(giveUpAfter); cg.populated() && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		cg.kill()
	}
}

// trackCgroup returns dir, a cgroup made by someone else (v1 or v2), for a
// run to list and kill its processes; nil if it cannot be read. Its
// cgroup.procs is opened anew for each read: a v1 hierarchy serves a held
// descriptor a cached list that may never be refreshed.
func trackCgroup(dir string) *cgroup {
	if unix.Access(filepath.Join(dir, "cgroup.procs"), unix.R_OK) != nil {
		return nil
	}
	return &cgroup{dir: dir, fd: -1, procs: -1}
}

// get returns an idle cgroup of the pool, creating one if none is idle.
func (c *Cgroups) get() (*cgroup, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("the cgroup pool is closed")
	}
	if len(c.kept) > 0 {
		kept := c.kept[:0]
		for _, cg := range c.kept {
			if cg.populated() {
				kept = append(kept, cg)
			} else {
				cg.remove() // named as kept: not reused
			}
		}
		c.kept = kept
	}
	if n := len(c.free); n > 0 {
		cg := c.free[n-1]
		c.free = c.free[:n-1]
		return cg, nil
	}
	for {
		c.next++
		dir := filepath.Join(c.root, "r"+strconv.Itoa(c.next))
		err := unix.Mkdir(dir, 0o755)
		if err == unix.EEXIST {
			continue // left by an earlier process with this pid
		}
		if err != nil {
			return nil, err
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Rmdir(dir)
			return nil, err
		}
		procs, err := unix.Openat(fd, "cgroup.procs", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(fd)
			unix.Rmdir(dir)
			return nil, err
		}
		c.created++
		return &cgroup{dir: dir, fd: fd, procs: procs}, nil
	}
}

// release gives cg back to the pool once its run is over. empty says the
// run saw it empty at the end; otherwise it is checked, and a cgroup that
// still holds processes waits until they have exited. A cgroup that was
// killed is removed instead of reused (see cgroup.killed).
func (c *Cgroups) release(cg *cgroup, empty bool) {
	if !empty && cg.populated() {
		// Renamed "k<n>", so that a later host whose pool finds it after
		// this process died knows the processes were kept on purpose.
		kept := filepath.Join(filepath.Dir(cg.dir), "k"+strings.TrimPrefix(filepath.Base(cg.dir), "r"))
		if unix.Rename(cg.dir, kept) == nil {
			cg.dir = kept
		}
		c.mu.Lock()
		c.kept = append(c.kept, cg)
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	if !c.closed && !cg.killed && len(c.free) < maxFree {
		c.free = append(c.free, cg)
		cg = nil
	}
	c.mu.Unlock()
	if cg != nil {
		cg.remove()
	}
}

// Close removes the pool's idle cgroups and its directory. Cgroups that
// still hold processes kept running by a run stay (and so does the pool's
// directory); Close then returns an error naming how many. Runs in
// progress are not affected; their cgroups are removed when they end.
func (c *Cgroups) Close() error {
	c.mu.Lock()
	c.closed = true
	free, kept := c.free, c.kept
	c.free, c.kept = nil, nil
	c.mu.Unlock()
	for _, cg := range free {
		cg.remove()
	}
	busy := 0
	for _, cg := range kept {
		if cg.populated() {
			cg.closeFDs()
			busy++
			continue
		}
		cg.remove()
	}
	if err := unix.Rmdir(c.root); err != nil && err != unix.ENOENT {
		if busy > 0 {
			return fmt.Errorf("runner: %d cgroups in %s still hold processes a run kept running", busy, c.root)
		}
		return fmt.Errorf("runner: cannot remove %s: %w", c.root, err)
	}
	return nil
}

func (cg *cgroup) remove() {
	cg.closeFDs()
	unix.Rmdir(cg.dir)
}

func (cg *cgroup) closeFDs() {
	if cg.fd >= 0 {
		unix.Close(cg.procs)
		unix.Close(cg.fd)
	}
}

// populated reports whether any live process is in cg.
func (cg *cgroup) populated() bool {
	var buf [128]byte
	data := readFile(cg.dir+"/cgroup.events", buf[:])
	if len(data) == 0 {
		return false // gone
	}
	return !bytes.Contains(data, []byte("populated 0"))
}

// add appends to live the processes in cg that it lacks, other than
// leader.
func (cg *cgroup) add(live []int, leader int) []int {
	var small [512]byte
	data := cg.readProcs(small[:])
	if len(data) == len(small) {
		data = cg.readProcs(make([]byte, 1<<20))
	}
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		pid, err := strconv.Atoi(string(line))
		if err != nil || pid == leader {
			continue
		}
		found := false
		for _, p := range live {
			if p == pid {
				found = true
				break
			}
		}
		if !found {
			live = append(live, pid)
		}
	}
	return live
}

// readProcs reads cgroup.procs from its start into buf.
func (cg *cgroup) readProcs(buf []byte) []byte {
	if cg.procs < 0 {
		return readFile(cg.dir+"/cgroup.procs", buf)
	}
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(cg.procs, buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	return buf[:n]
}

// kill sends SIGKILL to every process in cg, atomically with respect to
// forks. A pool's cgroup is not reused after that.
func (cg *cgroup) kill() {
	cg.killed = true
	fd, err := unix.Open(cg.dir+"/cgroup.kill", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	unix.Write(fd, []byte("1"))
	unix.Close(fd)
}

// sysProcAttr returns the attributes every command starts with: a new
// session and, when cg is set, cg as its cgroup. (No parent-death signal:
// Linux ties it to the forking thread, and forking from one dedicated
// thread cost a thread switch per start; the watchdog covers a dead host.)
func sysProcAttr(cg *cgroup) *syscall.SysProcAttr {
	if cg == nil {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: cg.fd}
}

// cgroupRefused reports whether a start error may come from the clone into
// a cgroup, rather than from the program: a start that fails this way is
// retried outside the cgroup.
func cgroupRefused(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EBUSY, syscall.EINVAL, syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EPERM, syscall.ENODEV, syscall.ENOENT:
		return true
	}
	return false
}
