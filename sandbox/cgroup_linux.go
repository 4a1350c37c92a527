package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// memoryCgroup finds a writable directory of a memory controller: a cgroup
// v2 directory whose children get the controller, or else this process's
// cgroup in a v1 memory hierarchy.
func memoryCgroup() (dir string, v2 bool) {
	for _, d := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		sc, err := os.ReadFile(filepath.Join(d, "cgroup.subtree_control"))
		if err == nil && strings.Contains(string(sc), "memory") && unix.Access(d, unix.W_OK) == nil {
			return d, true
		}
	}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || !strings.Contains(","+parts[1]+",", ",memory,") {
			continue
		}
		d := filepath.Join("/sys/fs/cgroup/memory", parts[2])
		if _, err := os.Stat(filepath.Join(d, "memory.limit_in_bytes")); err == nil && unix.Access(d, unix.W_OK) == nil {
			return d, false
		}
	}
	return "", false
}

// newCgroups creates the cgroups that hold s's limits: pids.max, and the
// memory limit (memory.max and memory.swap.max on v2,
// memory.limit_in_bytes and memory.memsw.limit_in_bytes on v1) so that
// shared mappings, tmpfs pages and every process of the tree count. It
// returns the cgroup.procs files the trampoline joins, how to remove the
// cgroups, whether pids.max caps the processes (else RLIMIT_NPROC must)
// and whether a memory limit was set (else RLIMIT_DATA must).
func newCgroups(s *Spec) (procs []string, remove func(), capped, memLimited bool) {
	var b [6]byte
	rand.Read(b[:])
	name := "agentexec-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	var dirs []string
	remove = func() {
		for i := len(dirs) - 1; i >= 0; i-- {
			os.Remove(dirs[i])
		}
	}
	mk := func(root string, files map[string]int64) bool {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return false
		}
		dirs = append(dirs, dir)
		for f, v := range files {
			if v <= 0 {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, f), []byte(strconv.FormatInt(v, 10)), 0); err != nil {
				os.Remove(dir)
				dirs = dirs[:len(dirs)-1]
				return false
			}
		}
		procs = append(procs, filepath.Join(dir, "cgroup.procs"))
		return true
	}
	mem, memV2 := "", false
	if s.MemoryBytes > 0 {
		mem, memV2 = memoryCgroup()
	}
	pids := ""
	if s.Processes > 0 {
		pids = Probe().PidsCgroup
	}
	switch {
	case mem != "" && memV2 && (pids == mem || pids == ""):
		files := map[string]int64{"memory.max": s.MemoryBytes, "memory.swap.max": 0}
		if pids == mem {
			files["pids.max"] = s.Processes
		}
		if mk(mem, files) {
			os.WriteFile(filepath.Join(mem, name, "memory.swap.max"), []byte("0"), 0)
			capped, memLimited = pids == mem, true
		}
	default:
		if pids != "" {
			capped = mk(pids, map[string]int64{"pids.max": s.Processes})
		}
		if mem != "" {
			// v1: memsw counts swap too; it must not be below the limit,
			// and is written after it.
			if mk(mem, map[string]int64{"memory.limit_in_bytes": s.MemoryBytes}) {
				os.WriteFile(filepath.Join(mem, name, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(s.MemoryBytes, 10)), 0)
				memLimited = true
			}
		}
	}
	return procs, remove, capped, memLimited
}

// MemoryCgroup reports whether a memory limit is enforced by a cgroup
// (every process and shared mappings counted) rather than RLIMIT_DATA.
func MemoryCgroup() bool {
	d, _ := memoryCgroup()
	return d != ""
}
