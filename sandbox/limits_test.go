//go:build linux

package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
)

func TestParseMax(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"max\n", 0, false},
		{"536870912\n", 512 << 20, false},
		{"1", 1, false},
		{"0", 0, false},
		{"-1", 0, false},                    // v1 cpu.cfs_quota_us
		{"9223372036854771712\n", 0, false}, // v1 memory.limit_in_bytes unlimited, page-rounded
		{"18446744073709551615", 0, false},  // beyond int64
		{"4611686018427387904", 0, false},   // 2^62: unlimited too
		{"", 0, true},
		{"MAX", 0, true},
		{"12k", 0, true},
		{"-2", 0, true},
		{"1 2", 0, true},
	} {
		got, err := parseMax(c.in)
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("parseMax(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestParseCPUMax(t *testing.T) {
	for _, c := range []struct {
		in      string
		q, p    int64
		wantErr bool
	}{
		{"max 100000\n", 0, 0, false},
		{"150000 100000\n", 150000, 100000, false},
		{"50000", 50000, 100000, false},
		{"max", 0, 0, false},
		{"", 0, 0, true},
		{"0 100000", 0, 0, true},
		{"-1 100000", 0, 0, true},
		{"100000 0", 0, 0, true},
		{"100000 -5", 0, 0, true},
		{"max max", 0, 0, true},
		{"1 2 3", 0, 0, true},
	} {
		q, p, err := parseCPUMax(c.in)
		if q != c.q || p != c.p || (err != nil) != c.wantErr {
			t.Errorf("parseCPUMax(%q) = %d, %d, %v; want %d, %d, error %v", c.in, q, p, err, c.q, c.p, c.wantErr)
		}
	}
}

func TestParseProcCgroup(t *testing.T) {
	got := parseProcCgroup([]byte("12:memory:/kubepods/pod1/c1\n4:cpu,cpuacct:/kubepods/pod1/c1\n0::/\nbad line\nx::/y\n3:pids:relative\n1:name=systemd:/a/../b\n"))
	want := []cgroupEntry{
		{[]string{"memory"}, "/kubepods/pod1/c1"},
		{[]string{"cpu", "cpuacct"}, "/kubepods/pod1/c1"},
		{nil, "/"},
		{[]string{"name=systemd"}, "/b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseProcCgroup = %+v\nwant %+v", got, want)
	}
}

// v2 builds a cgroup v2 tree: dir -> file -> content.
func v2(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{"cgroup.controllers": {Data: []byte("cpu memory pids\n")}}
	for name, data := range files {
		m[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return m
}

func TestCgroupLimits(t *testing.T) {
	for _, c := range []struct {
		name     string
		proc     string
		root     fstest.MapFS
		want     CgroupLimits
		problems int
	}{
		{
			name: "a pod with a cgroup namespace (v2)",
			proc: "0::/\n",
			root: v2(map[string]string{"memory.max": "536870912\n", "cpu.max": "150000 100000\n", "pids.max": "1024\n"}),
			want: CgroupLimits{Version: 2, Path: "/", MemoryBytes: 512 << 20, CPUQuota: 150000, CPUPeriod: 100000, Pids: 1024},
		},
		{
			name: "no limits (v2)",
			proc: "0::/\n",
			root: v2(map[string]string{"memory.max": "max\n", "cpu.max": "max 100000\n", "pids.max": "max\n"}),
			want: CgroupLimits{Version: 2, Path: "/"},
		},
		{
			name: "the lowest of the cgroup and its ancestors (v2, no cgroup namespace)",
			proc: "0::/kubepods.slice/pod1/c1\n",
			root: v2(map[string]string{
				"kubepods.slice/memory.max":         "8589934592\n",
				"kubepods.slice/pod1/memory.max":    "1073741824\n",
				"kubepods.slice/pod1/c1/memory.max": "max\n",
				"kubepods.slice/pod1/cpu.max":       "200000 100000\n",
				"kubepods.slice/pod1/c1/cpu.max":    "50000 50000\n",
				"kubepods.slice/pod1/c1/pids.max":   "4096\n",
				"kubepods.slice/pids.max":           "100000\n",
			}),
			want: CgroupLimits{Version: 2, Path: "/kubepods.slice/pod1/c1", MemoryBytes: 1 << 30, CPUQuota: 50000, CPUPeriod: 50000, Pids: 4096},
		},
		{
			name: "the container's cgroup mounted as the root, without a cgroup namespace (v2)",
			proc: "0::/system.slice/docker-abc.scope\n",
			root: v2(map[string]string{"memory.max": "268435456\n"}),
			want: CgroupLimits{Version: 2, Path: "/system.slice/docker-abc.scope", MemoryBytes: 256 << 20},
		},
		{
			name: "cgroup v1 (docker on a hybrid host)",
			proc: "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n3:pids:/docker/abc\n0::/docker/abc\n",
			root: fstest.MapFS{
				"unified/cgroup.procs":              {Data: []byte{}},
				"unified/cgroup.controllers":        {Data: []byte{}},
				"memory/memory.limit_in_bytes":      {Data: []byte("1073741824\n")},
				"cpu,cpuacct/cpu.cfs_quota_us":      {Data: []byte("200000\n")},
				"cpu,cpuacct/cpu.cfs_period_us":     {Data: []byte("100000\n")},
				"pids/pids.max":                     {Data: []byte("512\n")},
				"blkio/blkio.throttle.read_bps_dev": {Data: []byte{}},
			},
			want: CgroupLimits{Version: 1, Path: "/docker/abc", MemoryBytes: 1 << 30, CPUQuota: 200000, CPUPeriod: 100000, Pids: 512},
		},
		{
			name: "cgroup v1 without limits (page-rounded maximum, quota -1)",
			proc: "4:memory:/\n3:cpu,cpuacct:/\n",
			root: fstest.MapFS{
				"memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")},
				"cpu/cpu.cfs_quota_us":         {Data: []byte("-1\n")},
				"cpu/cpu.cfs_period_us":        {Data: []byte("100000\n")},
			},
			want: CgroupLimits{Version: 1, Path: "/"},
		},
		{
			name:     "garbage in a limit file is a problem, not a limit",
			proc:     "0::/\n",
			root:     v2(map[string]string{"memory.max": "lots\n", "cpu.max": "fast\n", "pids.max": "256\n"}),
			want:     CgroupLimits{Version: 2, Path: "/", Pids: 256},
			problems: 2,
		},
		{
			name: "no cgroup file system",
			proc: "0::/\n",
			root: fstest.MapFS{},
			want: CgroupLimits{Path: "/"},
		},
		{
			name: "an empty /proc/self/cgroup",
			root: v2(map[string]string{"memory.max": "1\n"}),
			want: CgroupLimits{},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := cgroupLimits([]byte(c.proc), c.root)
			if len(got.Problems) != c.problems {
				t.Errorf("problems %q, want %d", got.Problems, c.problems)
			}
			got.Problems = nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %#v\nwant %#v", got, c.want)
			}
		})
	}
}

// fakeCgroups points ReadCgroupLimits at a cgroup v2 tree on disk.
func fakeCgroups(t *testing.T, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	files["cgroup.controllers"] = "cpu memory pids\n"
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	proc := filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(proc, []byte("0::/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oldProc, oldRoot := procSelfCgroup, cgroupRoot
	procSelfCgroup, cgroupRoot = proc, dir
	t.Cleanup(func() { procSelfCgroup, cgroupRoot = oldProc, oldRoot })
}

func layerNamed(t *testing.T, layers []Layer, name string) Layer {
	t.Helper()
	for _, l := range layers {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no layer %q in %+v", name, layers)
	return Layer{}
}

// TestStatusShowsCgroupLimits: `sandbox status` reads the limits of its
// own cgroup (a pod's) and says they bound every command.
func TestStatusShowsCgroupLimits(t *testing.T) {
	fakeCgroups(t, map[string]string{"memory.max": "536870912\n", "cpu.max": "150000 100000\n", "pids.max": "1024\n"})
	l := layerNamed(t, Status(), "cgroup limits")
	if !l.Available || l.State != "used" {
		t.Errorf("state %q, available %v", l.State, l.Available)
	}
	for _, want := range []string{"memory.max 512 MiB", "cpu.max 1.5 CPUs (150000/100000)", "pids.max 1024", "cgroup v2"} {
		if !strings.Contains(l.Detail, want) {
			t.Errorf("detail %q lacks %q", l.Detail, want)
		}
	}

	fakeCgroups(t, map[string]string{"memory.max": "max\n", "cpu.max": "max 100000\n", "pids.max": "max\n"})
	l = layerNamed(t, Status(), "cgroup limits")
	if l.Available || l.State != "missing" || l.Fix == "" || l.Open == "" || !strings.Contains(l.Detail, "memory.max none") {
		t.Errorf("without limits: %+v", l)
	}

	fakeCgroups(t, map[string]string{"memory.max": "a lot\n"})
	l = layerNamed(t, Status(), "cgroup limits")
	if !strings.Contains(l.Detail, "unreadable") || !strings.Contains(l.Detail, `"a lot"`) {
		t.Errorf("a bad file is not reported: %+v", l)
	}
}

func TestDetectRuntime(t *testing.T) {
	const gvisorVersion = "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016\n"
	for _, c := range []struct {
		name   string
		facts  runtimeFacts
		gvisor bool
	}{
		{"gVisor's cmdline", runtimeFacts{landlockErrno: syscall.ENOSYS, version: "Linux version 4.4.0", cmdline: "BOOT_IMAGE=/vmlinuz-4.4.0-gvisor quiet\n"}, true},
		{"gVisor's build stamp", runtimeFacts{landlockErrno: syscall.ENOSYS, version: gvisorVersion}, true},
		{"gVisor naming itself in the version", runtimeFacts{version: "Linux version 4.19.0-gvisor #1 SMP"}, true},
		{"ENOSYS alone: an old kernel or a seccomp profile", runtimeFacts{landlockErrno: syscall.ENOSYS, version: "Linux version 5.10.0-28-amd64 #1 SMP Debian"}, false},
		{"a normal kernel", runtimeFacts{version: "Linux version 6.18.4 #1 SMP PREEMPT_DYNAMIC", cmdline: "quiet root=/dev/sda1"}, false},
		{"nothing readable", runtimeFacts{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := detectRuntime(c.facts)
			if r.GVisor != c.gvisor || (len(r.Evidence) > 0) != c.gvisor || r.LandlockErrno != c.facts.landlockErrno {
				t.Errorf("%+v", r)
			}
			if c.gvisor && c.facts.landlockErrno == syscall.ENOSYS && !strings.Contains(strings.Join(r.Evidence, ","), "ENOSYS") {
				t.Errorf("the ENOSYS of Landlock is not in the evidence: %q", r.Evidence)
			}
		})
	}
}

// TestStatusUnderGVisor: under gVisor (Landlock answering ENOSYS) status
// says which layers the outer runtime provides, and that Landlock is
// missing because of it, instead of failing silently.
func TestStatusUnderGVisor(t *testing.T) {
	oldFacts, oldProbe := gatherRuntimeFacts, probe
	t.Cleanup(func() { gatherRuntimeFacts, probe = oldFacts, oldProbe })
	gatherRuntimeFacts = func() runtimeFacts {
		return runtimeFacts{landlockErrno: syscall.ENOSYS, version: "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016\n", cmdline: "BOOT_IMAGE=/vmlinuz-4.4.0-gvisor quiet\n"}
	}
	probe = func() State {
		st := oldProbe()
		st.LandlockABI = 0
		return st
	}
	layers := Status()
	rt := layerNamed(t, layers, "outer runtime")
	if !rt.Available || rt.State != "used" || !strings.Contains(rt.Detail, "gVisor") || !strings.Contains(rt.Detail, "ENOSYS") ||
		!strings.Contains(rt.Detail, "host's kernel") || !strings.Contains(rt.Detail, "not between the commands and agentexec") {
		t.Errorf("outer runtime: %+v", rt)
	}
	ll := layerNamed(t, layers, "landlock")
	if ll.Available || ll.State != "missing" || !strings.Contains(ll.Detail, "gVisor") || !strings.Contains(ll.Detail, "outer runtime") || ll.Fix == "" {
		t.Errorf("landlock: %+v", ll)
	}
	spec, _ := Profile("workspace-write", ProfileOptions{Workspace: "/"})
	if missing := spec.Missing(); len(missing) == 0 || !strings.Contains(missing[0], "Landlock") {
		t.Errorf("a profile needing Landlock is not refused under gVisor: %q", missing)
	}

	gatherRuntimeFacts = func() runtimeFacts {
		return runtimeFacts{landlockErrno: syscall.ENOSYS, version: "Linux version 5.4.0"}
	}
	ll = layerNamed(t, Status(), "landlock")
	if !strings.Contains(ll.Detail, "ENOSYS") || strings.Contains(ll.Detail, "gVisor") {
		t.Errorf("landlock with ENOSYS outside gVisor: %+v", ll)
	}
	rt = layerNamed(t, Status(), "outer runtime")
	if rt.Available || rt.State != "missing" || rt.Fix == "" {
		t.Errorf("outer runtime outside gVisor: %+v", rt)
	}
}

// FuzzCgroupLimits: whatever the cgroup files hold, the limits are never
// negative, a CPU quota always has its period, and a limit is reported
// only when the file parsed.
func FuzzCgroupLimits(f *testing.F) {
	f.Add("0::/\n", "536870912\n", "150000 100000\n", "1024\n")
	f.Add("0::/a/b\n", "max\n", "max 100000\n", "max\n")
	f.Add("12:memory:/x\n0::/x\n", "9223372036854771712", "-1", "0")
	f.Add("", "", "", "")
	f.Add("0::/../..\n", "18446744073709551615", "1 1", "-5")
	f.Fuzz(func(t *testing.T, proc, mem, cpu, pids string) {
		v, err := parseMax(mem)
		if v < 0 || (err != nil && v != 0) {
			t.Fatalf("parseMax(%q) = %d, %v", mem, v, err)
		}
		if err == nil && v > 0 {
			if again, err := parseMax(strconv.FormatInt(v, 10)); err != nil || again != v {
				t.Fatalf("parseMax(%q) = %d, but %d reads back as %d, %v", mem, v, v, again, err)
			}
		}
		q, p, err := parseCPUMax(cpu)
		if q < 0 || p < 0 || (q > 0) != (p > 0) || (err != nil && (q != 0 || p != 0)) {
			t.Fatalf("parseCPUMax(%q) = %d, %d, %v", cpu, q, p, err)
		}
		root := v2(map[string]string{"memory.max": mem, "cpu.max": cpu, "pids.max": pids})
		for _, e := range parseProcCgroup([]byte(proc)) {
			if !strings.HasPrefix(e.path, "/") {
				t.Fatalf("relative cgroup path %q from %q", e.path, proc)
			}
			if d := strings.TrimPrefix(e.path, "/"); d != "" && fs.ValidPath(d) {
				root[d+"/memory.max"] = &fstest.MapFile{Data: []byte(mem)}
			}
		}
		l := cgroupLimits([]byte(proc), root)
		if l.MemoryBytes < 0 || l.Pids < 0 || l.CPUQuota < 0 || (l.CPUQuota > 0) != (l.CPUPeriod > 0) {
			t.Fatalf("limits %+v", l)
		}
		if mv, err := parseMax(mem); l.MemoryBytes != 0 && (err != nil || mv != l.MemoryBytes) {
			t.Fatalf("memory %d from %q", l.MemoryBytes, mem)
		}
		_ = l.String()
	})
}

// BenchmarkStatusExtras: what the two layers added to sandbox status cost
// (a metrics scrape may read them), beside reading /proc/self/cgroup
// alone as the baseline.
func BenchmarkStatusExtras(b *testing.B) {
	b.Run("baseline-read-proc-self-cgroup", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadFile("/proc/self/cgroup"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadCgroupLimits", func(b *testing.B) {
		for b.Loop() {
			ReadCgroupLimits()
		}
	})
	b.Run("DetectRuntime", func(b *testing.B) {
		for b.Loop() {
			DetectRuntime()
		}
	})
}
