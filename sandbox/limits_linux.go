package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// CgroupLimits are the resource limits of the cgroup agentexec runs in: a
// pod's or container's resources.limits, a systemd unit's MemoryMax=,
// CPUQuota= and TasksMax=. They bound agentexec and every command it
// starts together, whatever the sandbox profile says. Each value is the
// lowest found in this process's cgroup and the ancestors visible to it.
// Zero means no limit.
type CgroupLimits struct {
	// Version is the cgroup version the limits were read from: 2, 1, or
	// 0 when no limit file could be read (no cgroup file system mounted).
	Version int `json:"version"`
	// Path is this process's cgroup as /proc/self/cgroup names it (the
	// unified hierarchy's, else the memory controller's).
	Path string `json:"path,omitempty"`
	// MemoryBytes is memory.max (v1: memory.limit_in_bytes).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// CPUQuota and CPUPeriod are cpu.max in microseconds (v1:
	// cpu.cfs_quota_us and cpu.cfs_period_us): CPUQuota/CPUPeriod CPUs.
	CPUQuota  int64 `json:"cpu_quota_us,omitempty"`
	CPUPeriod int64 `json:"cpu_period_us,omitempty"`
	// Pids is pids.max: the processes and threads of the cgroup.
	Pids int64 `json:"pids,omitempty"`
	// Problems name the limit files that exist but could not be read or
	// parsed; their limits are left at zero.
	Problems []string `json:"problems,omitempty"`
}

// CPUs is the CPU limit in CPUs (CPUQuota/CPUPeriod), 0 without one.
func (l CgroupLimits) CPUs() float64 {
	if l.CPUQuota <= 0 || l.CPUPeriod <= 0 {
		return 0
	}
	return float64(l.CPUQuota) / float64(l.CPUPeriod)
}

// Any reports whether at least one limit is set.
func (l CgroupLimits) Any() bool { return l.MemoryBytes > 0 || l.CPUQuota > 0 || l.Pids > 0 }

// String describes the limits for people, e.g. "memory.max 512 MiB,
// cpu.max 1.5 CPUs (150000/100000), pids.max 1024".
func (l CgroupLimits) String() string {
	var parts []string
	mem, cpu, pids := "memory.max", "cpu.max", "pids.max"
	if l.Version == 1 {
		mem, cpu = "memory.limit_in_bytes", "cpu.cfs_quota_us"
	}
	if l.MemoryBytes > 0 {
		parts = append(parts, mem+" "+formatBytes(l.MemoryBytes))
	} else {
		parts = append(parts, mem+" none")
	}
	if l.CPUQuota > 0 {
		parts = append(parts, fmt.Sprintf("%s %s CPUs (%d/%d)", cpu, strconv.FormatFloat(l.CPUs(), 'f', -1, 64), l.CPUQuota, l.CPUPeriod))
	} else {
		parts = append(parts, cpu+" none")
	}
	if l.Pids > 0 {
		parts = append(parts, pids+" "+strconv.FormatInt(l.Pids, 10))
	} else {
		parts = append(parts, pids+" none")
	}
	return strings.Join(parts, ", ")
}

// formatBytes prints n in the largest binary unit that divides it, or in
// bytes.
func formatBytes(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// Where the limits are read from; tests point them at a fake tree.
var (
	procSelfCgroup = "/proc/self/cgroup"
	cgroupRoot     = "/sys/fs/cgroup"
)

// ReadCgroupLimits reads the limits of the cgroup this process runs in,
// from /proc/self/cgroup and the hierarchies under /sys/fs/cgroup (cgroup
// v2, the unified hierarchy of a hybrid system, or v1's memory, cpu and
// pids controllers).
func ReadCgroupLimits() CgroupLimits {
	data, err := os.ReadFile(procSelfCgroup)
	if err != nil {
		return CgroupLimits{Problems: []string{procSelfCgroup + ": " + err.Error()}}
	}
	return cgroupLimits(data, os.DirFS(cgroupRoot))
}

// cgroupEntry is one line of /proc/self/cgroup: "ID:CONTROLLERS:PATH".
type cgroupEntry struct {
	controllers []string // empty for the unified (v2) hierarchy
	path        string
}

// parseProcCgroup parses /proc/self/cgroup; malformed lines are skipped.
func parseProcCgroup(data []byte) []cgroupEntry {
	var out []cgroupEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<16)
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		ctl, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			continue
		}
		e := cgroupEntry{path: path.Clean(p)}
		if ctl != "" {
			e.controllers = strings.Split(ctl, ",")
		}
		out = append(out, e)
	}
	return out
}

// parseMax parses memory.max or pids.max: "max" (no limit, 0) or a
// positive number. A v1 memory.limit_in_bytes of 2^62 or more (the
// kernel's "unlimited", rounded to a page) is no limit too.
func parseMax(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" || s == "-1" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		if u, uerr := strconv.ParseUint(s, 10, 64); uerr == nil && u > math.MaxInt64 {
			return 0, nil
		}
		return 0, fmt.Errorf("%q is neither \"max\" nor a number", s)
	}
	if v >= 1<<62 {
		return 0, nil
	}
	return v, nil
}

// parseCPUMax parses cpu.max: "QUOTA PERIOD" in microseconds, QUOTA being
// "max" for no limit (0, 0). The period may be left out (100000).
func parseCPUMax(s string) (quota, period int64, err error) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 2 {
		return 0, 0, fmt.Errorf("%q is not \"QUOTA PERIOD\"", strings.TrimSpace(s))
	}
	period = 100000
	if len(f) == 2 {
		if period, err = strconv.ParseInt(f[1], 10, 64); err != nil || period <= 0 {
			return 0, 0, fmt.Errorf("%q: the period is not a positive number", strings.TrimSpace(s))
		}
	}
	if f[0] == "max" {
		return 0, 0, nil
	}
	if quota, err = strconv.ParseInt(f[0], 10, 64); err != nil || quota <= 0 {
		return 0, 0, fmt.Errorf("%q: the quota is neither \"max\" nor a positive number", strings.TrimSpace(s))
	}
	return quota, period, nil
}

// cgroupLimits works out the limits from /proc/self/cgroup's content and
// the cgroup file systems under root.
func cgroupLimits(procCgroup []byte, root fs.FS) CgroupLimits {
	var l CgroupLimits
	entries := parseProcCgroup(procCgroup)
	v2Path, v1 := "", map[string]string{}
	for _, e := range entries {
		if len(e.controllers) == 0 {
			v2Path = e.path
			continue
		}
		for _, c := range e.controllers {
			v1[c] = e.path
		}
	}
	l.Path = v2Path
	if l.Path == "" {
		l.Path = v1["memory"]
	}
	// Each limit is the lowest in this cgroup and its visible ancestors.
	lower := func(cur, v int64) int64 {
		if v > 0 && (cur == 0 || v < cur) {
			return v
		}
		return cur
	}
	var found2, found1 bool
	read := func(dirs []string, file string, each func(string) error) bool {
		found := false
		for _, d := range dirs {
			b, err := fs.ReadFile(root, path.Join(d, file))
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					l.Problems = append(l.Problems, path.Join(d, file)+": "+err.Error())
				}
				continue
			}
			found = true
			if err := each(string(b)); err != nil {
				l.Problems = append(l.Problems, path.Join(d, file)+": "+err.Error())
			}
		}
		return found
	}
	cpu := func(q, p int64) {
		if q > 0 && p > 0 && (l.CPUQuota == 0 || float64(q)/float64(p) < l.CPUs()) {
			l.CPUQuota, l.CPUPeriod = q, p
		}
	}
	// cgroup v2: the root itself or, on a hybrid system, "unified".
	if v2Path != "" {
		for _, mount := range []string{".", "unified"} {
			if _, err := fs.Stat(root, path.Join(mount, "cgroup.controllers")); err != nil {
				continue
			}
			dirs := lineage(root, mount, v2Path)
			found2 = read(dirs, "memory.max", func(s string) error {
				v, err := parseMax(s)
				l.MemoryBytes = lower(l.MemoryBytes, v)
				return err
			}) || found2
			found2 = read(dirs, "cpu.max", func(s string) error {
				q, p, err := parseCPUMax(s)
				cpu(q, p)
				return err
			}) || found2
			found2 = read(dirs, "pids.max", func(s string) error {
				v, err := parseMax(s)
				l.Pids = lower(l.Pids, v)
				return err
			}) || found2
			break
		}
	}
	// cgroup v1, for what v2 did not hold (hybrid systems keep the
	// controllers in v1).
	v1Dirs := func(controller string) []string {
		p, ok := v1[controller]
		if !ok {
			return nil
		}
		mounts := []string{controller}
		if controller == "cpu" {
			mounts = append(mounts, "cpu,cpuacct", "cpuacct,cpu")
		}
		for _, mount := range mounts {
			if fi, err := fs.Stat(root, mount); err == nil && fi.IsDir() {
				return lineage(root, mount, p)
			}
		}
		return nil
	}
	if !found2 || l.MemoryBytes == 0 {
		found1 = read(v1Dirs("memory"), "memory.limit_in_bytes", func(s string) error {
			v, err := parseMax(s)
			l.MemoryBytes = lower(l.MemoryBytes, v)
			return err
		}) || found1
	}
	if !found2 || l.CPUQuota == 0 {
		for _, d := range v1Dirs("cpu") {
			q, qerr := fs.ReadFile(root, path.Join(d, "cpu.cfs_quota_us"))
			if qerr != nil {
				continue
			}
			found1 = true
			p, perr := fs.ReadFile(root, path.Join(d, "cpu.cfs_period_us"))
			if perr != nil {
				l.Problems = append(l.Problems, path.Join(d, "cpu.cfs_period_us")+": "+perr.Error())
				continue
			}
			quota, err := parseMax(string(q))
			if err != nil {
				l.Problems = append(l.Problems, path.Join(d, "cpu.cfs_quota_us")+": "+err.Error())
				continue
			}
			period, err := strconv.ParseInt(strings.TrimSpace(string(p)), 10, 64)
			if err != nil || period <= 0 {
				l.Problems = append(l.Problems, path.Join(d, "cpu.cfs_period_us")+fmt.Sprintf(": %q is not a positive number", strings.TrimSpace(string(p))))
				continue
			}
			cpu(quota, period)
		}
	}
	if !found2 || l.Pids == 0 {
		found1 = read(v1Dirs("pids"), "pids.max", func(s string) error {
			v, err := parseMax(s)
			l.Pids = lower(l.Pids, v)
			return err
		}) || found1
	}
	switch {
	case found2 && !found1:
		l.Version = 2
	case found1:
		l.Version = 1
		if p, ok := v1["memory"]; ok {
			l.Path = p
		}
	}
	return l
}

// lineage lists the directories (relative to root) of the cgroup p in the
// hierarchy mounted at mount, from the cgroup up to the mount: the cgroup
// first. A cgroup missing under the mount (a container that sees its own
// cgroup as the mount's root, without a cgroup namespace) is the mount
// itself.
func lineage(root fs.FS, mount, p string) []string {
	dir := path.Join(mount, p)
	if fi, err := fs.Stat(root, dir); err != nil || !fi.IsDir() {
		return []string{mount}
	}
	var dirs []string
	for {
		dirs = append(dirs, dir)
		if dir == mount || dir == "." || dir == "/" {
			return dirs
		}
		dir = path.Dir(dir)
	}
}

// OuterRuntime is what runs agentexec's own container, where it can be
// told: a user-space kernel such as gVisor provides some of the sandbox's
// layers for the whole pod.
type OuterRuntime struct {
	// GVisor is true under gVisor (runsc).
	GVisor bool `json:"gvisor"`
	// Evidence lists what was seen.
	Evidence []string `json:"evidence,omitempty"`
	// LandlockErrno is the error of landlock_create_ruleset's version
	// query (0 when it answered): ENOSYS where the system call does not
	// exist (gVisor, kernels before 5.13, or a seccomp profile that
	// refuses it), EOPNOTSUPP where Landlock is built but not enabled.
	LandlockErrno syscall.Errno `json:"landlock_errno,omitempty"`
}

// runtimeFacts are what DetectRuntime looks at.
type runtimeFacts struct {
	landlockErrno syscall.Errno // of landlock_create_ruleset(NULL, 0, VERSION)
	version       string        // /proc/version
	cmdline       string        // /proc/cmdline
}

// gatherRuntimeFacts measures runtimeFacts; tests replace it.
var gatherRuntimeFacts = func() runtimeFacts {
	var f runtimeFacts
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno != 0 {
		f.landlockErrno = errno
	}
	if b, err := os.ReadFile("/proc/version"); err == nil {
		f.version = string(b)
	}
	if b, err := os.ReadFile("/proc/cmdline"); err == nil {
		f.cmdline = string(b)
	}
	return f
}

// gvisorStamp is the build line gVisor's /proc/version has carried,
// whatever kernel version it claims.
const gvisorStamp = "#1 SMP Sun Jan 10 15:06:54 PST 2016"

// DetectRuntime says whether agentexec runs under gVisor, from markers
// gVisor leaves in /proc (its /proc/cmdline and /proc/version name it, and
// its /proc/version carries a fixed build stamp), with Landlock's answer
// as supporting evidence. An ENOSYS from Landlock alone is not taken as
// gVisor: old kernels and container seccomp profiles answer so too.
func DetectRuntime() OuterRuntime { return detectRuntime(gatherRuntimeFacts()) }

func detectRuntime(f runtimeFacts) OuterRuntime {
	r := OuterRuntime{LandlockErrno: f.landlockErrno}
	if strings.Contains(strings.ToLower(f.cmdline), "gvisor") {
		r.Evidence = append(r.Evidence, "/proc/cmdline names gVisor")
	}
	if v := strings.ToLower(f.version); strings.Contains(v, "gvisor") {
		r.Evidence = append(r.Evidence, "/proc/version names gVisor")
	} else if strings.Contains(f.version, gvisorStamp) {
		r.Evidence = append(r.Evidence, "/proc/version carries gVisor's fixed build stamp")
	}
	r.GVisor = len(r.Evidence) > 0
	if r.GVisor && f.landlockErrno == syscall.ENOSYS {
		r.Evidence = append(r.Evidence, "landlock_create_ruleset returns ENOSYS")
	}
	return r
}
