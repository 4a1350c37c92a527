package runner

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// prepareHost makes this process a child subreaper, once, so that
// processes a command double-forked away from its session are re-parented
// here (instead of to init) and can be found and reaped by pid. It also
// marks close-on-exec every descriptor above stderr this process inherited
// without that flag (Go opens its own with it), so that commands never
// inherit stray descriptors of whatever started the host.
var prepareHost = sync.OnceFunc(func() {
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
				unix.CloseOnExec(fd)
			}
		}
	}
})

func signalProcess(pid int, sig syscall.Signal) { syscall.Kill(pid, sig) }

// directProbe is how many newly allocated pids scan probes one by one
// before it lists /proc instead.
const directProbe = 4

// procInfo is what /proc/<pid>/stat says about one process.
type procInfo struct {
	pid, ppid, pgrp, sid int
	state                byte
}

// scan returns the tree's live processes other than the leader, and reaps
// those of its zombies that are this host's children. It reads /proc only
// for pids allocated after the leader, so its cost does not grow with the
// number of unrelated processes on the machine.
func (t *tree) scan() []int {
	self := unix.Getpid()
	reapKept(self)
	// Everything the command started has a pid allocated after the
	// leader's. When few pids were allocated since, probe them directly
	// instead of listing /proc.
	last := lastPid()
	var pids []int
	if last >= t.leader && last-t.leader <= directProbe {
		for pid := t.leader + 1; pid <= last; pid++ {
			pids = append(pids, pid)
		}
	} else {
		pids = listPids()
		last = lastPid()
	}
	var infos []procInfo
	for _, pid := range pids {
		if pid == t.leader || !createdAfter(pid, t.leader, last) {
			continue
		}
		if info, ok := readStat(pid); ok {
			infos = append(infos, info)
		}
	}
	if len(infos) == 0 {
		return nil
	}
	ours := map[int]bool{t.leader: true}
	for pid := range t.seen {
		ours[pid] = true
	}
	needle := []byte("\x00" + t.marker + "\x00")
	for _, in := range infos {
		switch {
		case in.sid == t.leader || in.pgrp == t.leader:
			ours[in.pid] = true
		case in.ppid == self && !isLeader(in.pid) && hasMarker(in.pid, needle):
			ours[in.pid] = true
		}
	}
	for changed := true; changed; { // descendants of what is ours are ours
		changed = false
		for _, in := range infos {
			if !ours[in.pid] && ours[in.ppid] {
				ours[in.pid] = true
				changed = true
			}
		}
	}
	var live []int
	for _, in := range infos {
		if !ours[in.pid] {
			continue
		}
		if in.state == 'Z' || in.state == 'X' {
			if in.ppid == self {
				var ws unix.WaitStatus
				unix.Wait4(in.pid, &ws, unix.WNOHANG, nil)
			}
			continue
		}
		live = append(live, in.pid)
	}
	return live
}

// createdAfter reports whether pid may have been allocated after leader,
// given the last pid allocated (or -1 if unknown); pids wrap around.
func createdAfter(pid, leader, last int) bool {
	switch {
	case last < 0:
		return true
	case last >= leader:
		return pid > leader && pid <= last
	default:
		return pid > leader || pid <= last
	}
}

// reapKept reaps processes left running by KeepLeftovers once they exit.
func reapKept(self int) {
	keptMu.Lock()
	defer keptMu.Unlock()
	for pid := range kept {
		info, ok := readStat(pid)
		switch {
		case !ok || info.ppid != self && (info.state == 'Z' || info.state == 'X'):
			delete(kept, pid)
		case info.state == 'Z' || info.state == 'X':
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			delete(kept, pid)
		}
	}
}

// listPids returns the pids of all processes in /proc.
func listPids() []int {
	fd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	buf := make([]byte, 32<<10)
	var pids []int
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil || n <= 0 {
			return pids
		}
		for off := 0; off+19 < n; {
			reclen := int(buf[off+16]) | int(buf[off+17])<<8
			if reclen == 0 {
				break
			}
			name := buf[off+19 : off+reclen]
			off += reclen
			if len(name) == 0 || name[0] < '0' || name[0] > '9' {
				continue
			}
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if pid, err := strconv.Atoi(string(name)); err == nil {
				pids = append(pids, pid)
			}
		}
	}
}

// readFile reads a small /proc file without the runtime poller.
func readFile(path string, buf []byte) []byte {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	return buf[:n]
}

// lastPidFD is /proc/sys/kernel/ns_last_pid, opened once: opening a
// sysctl file costs more than reading it.
var lastPidFD = sync.OnceValue(func() int {
	fd, err := unix.Open("/proc/sys/kernel/ns_last_pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
})

// lastPid returns the last pid allocated in this pid namespace, or -1 if
// it cannot be read.
func lastPid() int {
	fd := lastPidFD()
	if fd < 0 {
		return -1
	}
	var buf [32]byte
	n, err := unix.Pread(fd, buf[:], 0)
	if err != nil || n <= 0 {
		return -1
	}
	v, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	if err != nil {
		return -1
	}
	return v
}

// readStat parses /proc/<pid>/stat.
func readStat(pid int) (procInfo, bool) {
	var buf [512]byte
	data := readFile("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return procInfo{}, false
	}
	f := bytes.Fields(data[i+2:])
	if len(f) < 4 || len(f[0]) != 1 {
		return procInfo{}, false
	}
	info := procInfo{pid: pid, state: f[0][0]}
	var err1, err2, err3 error
	info.ppid, err1 = strconv.Atoi(string(f[1]))
	info.pgrp, err2 = strconv.Atoi(string(f[2]))
	info.sid, err3 = strconv.Atoi(string(f[3]))
	return info, err1 == nil && err2 == nil && err3 == nil
}

// hasMarker reports whether the initial environment of pid contains needle
// ("\x00KEY=value\x00").
func hasMarker(pid int, needle []byte) bool {
	buf := make([]byte, 256<<10)
	env := readFile("/proc/"+strconv.Itoa(pid)+"/environ", buf[1:])
	buf[0] = 0
	env = buf[:len(env)+1]
	env = append(env, 0)
	return bytes.Contains(env, needle)
}
