package terminal

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// stat is what /proc/<pid>/stat says about a process.
type stat struct {
	pid, ppid, pgrp, sid, tpgid int
	start                       uint64
	comm                        string
}

func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return stat{}, false
	}
	f := bytes.Fields(b[close+1:])
	// f[0] state, f[1] ppid, f[2] pgrp, f[3] session, f[4] tty_nr,
	// f[5] tpgid, ..., f[19] starttime
	if len(f) < 20 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return stat{}, false
	}
	n := func(i int) int { v, _ := strconv.Atoi(string(f[i])); return v }
	start, _ := strconv.ParseUint(string(f[19]), 10, 64)
	return stat{pid: pid, ppid: n(1), pgrp: n(2), sid: n(3), tpgid: n(5), start: start, comm: string(b[open+1 : close])}, true
}

// foreground finds the process reading the input of the session led by
// leader.
func foreground(leader int, tty bool) Foreground {
	ls, ok := readStat(leader)
	if !ok {
		return Foreground{}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return Foreground{}
	}
	var cands []stat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(pid)
		if !ok || st.sid != leader {
			continue
		}
		if tty && st.pgrp != ls.tpgid {
			continue
		}
		cands = append(cands, st)
	}
	// Among the leaves, a shell wins (it may be the one reading, and its
	// input is checked), then the newest.
	var best *stat
	bestShell := false
	for i := range cands {
		c := &cands[i]
		leaf := true
		for j := range cands {
			if cands[j].ppid == c.pid {
				leaf = false
				break
			}
		}
		if !leaf {
			continue
		}
		shell := IsShell(c.comm) || IsShell(exeName(c.pid))
		switch {
		case best == nil, shell && !bestShell,
			shell == bestShell && (c.start > best.start || (c.start == best.start && c.pid > best.pid)):
			best, bestShell = c, shell
		}
	}
	if best == nil {
		return Foreground{}
	}
	name := exeName(best.pid)
	if name == "" {
		name = best.comm
	}
	return Foreground{Pid: best.pid, Name: name, Shell: bestShell}
}

// exeName is the base name of pid's executable, or "" when it cannot be
// read.
func exeName(pid int) string {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return ""
	}
	return filepath.Base(exe)
}
