package runner

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchdogEnd bounds how long the watchdog keeps looking for processes of
// a dead host's runs.
const watchdogEnd = 5 * time.Second

// Main turns this process into a runner watchdog and exits when WatchHost
// started it as one; otherwise it returns at once. Call it first thing in
// main (and in TestMain) of any program that calls WatchHost.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != watchdogArg {
		mainCalled.Store(true)
		return
	}
	os.Exit(watchdog())
}

// mainCalled records that this program calls Main, and so can be
// re-executed as the watchdog.
var mainCalled atomic.Bool

// WatchdogAvailable reports whether WatchHost can start a watchdog: this
// is Linux and the program called Main.
func WatchdogAvailable() bool { return mainCalled.Load() }

var (
	watchMu   sync.Mutex
	watchPipe *os.File // the host's end of the pipe to the watchdog, or nil
	watchErr  error
	watchOnce sync.Once
)

// WatchHost starts, once per process, a watchdog: a small process (this
// program re-executed; see Main) that outlives this one and, if this
// process dies while commands are still running (SIGKILL, a crash, the
// OOM killer), ends each of their whole trees within a few seconds: their
// process groups and sessions, processes that carry their marker, and
// their cgroups. Commands that ended, and processes a run deliberately
// kept (Spec.KeepLeftovers), are not touched. Long-lived hosts (servers)
// should call it at start. Without it, on Linux only a command's main
// process is killed when the host dies (the parent-death signal). The
// error wraps ErrNoWatchdog.
func WatchHost() error {
	watchOnce.Do(func() { watchErr = startWatchdog() })
	return watchErr
}

func startWatchdog() error {
	if !mainCalled.Load() {
		return fmt.Errorf("%w: this program does not call runner.Main first thing in main, so it cannot be re-executed as the watchdog", ErrNoWatchdog)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%w: cannot find this program: %v", ErrNoWatchdog, err)
	}
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoWatchdog, err)
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return fmt.Errorf("%w: %v", ErrNoWatchdog, err)
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		statR.Close()
		statW.Close()
		return fmt.Errorf("%w: %v", ErrNoWatchdog, err)
	}
	proc, err := os.StartProcess(exe, []string{exe, watchdogArg}, &os.ProcAttr{
		Env:   watchdogEnv,
		Files: []*os.File{cmdR, statW, devNull},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	cmdR.Close()
	statW.Close()
	devNull.Close()
	if err != nil {
		cmdW.Close()
		statR.Close()
		return fmt.Errorf("%w: cannot start %s: %v", ErrNoWatchdog, exe, err)
	}
	statR.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := bufio.NewReader(statR).ReadString('\n')
	statR.Close()
	if line != "ready\n" {
		proc.Kill()
		proc.Wait()
		cmdW.Close()
		return fmt.Errorf("%w: %s did not start as a watchdog", ErrNoWatchdog, exe)
	}
	proc.Release() // it normally outlives this process
	watchMu.Lock()
	watchPipe = cmdW
	watchMu.Unlock()
	return nil
}

// watchStart tells the watchdog that a run's main process started, with
// what identifies its tree: its marker entry (KEY=value) and cgroups.
func watchStart(pid int, marker string, cgroups ...string) {
	watchMu.Lock()
	defer watchMu.Unlock()
	if watchPipe == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "r %d %s", pid, strconv.Quote(marker))
	for _, dir := range cgroups {
		if dir != "" {
			b.WriteString(" " + strconv.Quote(dir))
		}
	}
	b.WriteByte('\n')
	if _, err := watchPipe.WriteString(b.String()); err != nil {
		watchPipe.Close() // the watchdog is gone: stop telling it
		watchPipe = nil
	}
}

// watchEnd tells the watchdog that a run is over: its tree was ended, or,
// when kept, deliberately left running (so the watchdog leaves the
// processes carrying its marker alone).
func watchEnd(pid int, marker string, kept bool) {
	watchMu.Lock()
	defer watchMu.Unlock()
	if watchPipe == nil {
		return
	}
	line := "d " + strconv.Itoa(pid) + "\n"
	if kept {
		line = "k " + strconv.Itoa(pid) + " " + strconv.Quote(marker) + "\n"
	}
	if _, err := watchPipe.WriteString(line); err != nil {
		watchPipe.Close()
		watchPipe = nil
	}
}

// watchedRun is what the watchdog knows of one run in progress.
type watchedRun struct {
	marker  []byte   // MarkerVar=value, as it stands in /proc/PID/environ
	cgroups []string // cgroup directories holding the tree
}

// watchState is what the watchdog knows of its host's runs.
type watchState struct {
	prefix []byte             // MarkerVar=<host pid>- : every run's marker starts so
	runs   map[int]watchedRun // runs in progress, by main process
	kept   map[string]bool    // markers of runs whose leftovers were kept
}

// watchdog reads the host's reports until the pipe ends (the host is
// gone), then ends the trees of the runs still in progress, and every
// process carrying the marker of one of the host's runs, except those a
// run kept on purpose. (A marker reaches a process when the run's main
// process is executed, so this also covers a run the host died starting.)
func watchdog() int {
	os.Stdout.WriteString("ready\n")
	os.Stdout.Close()
	st := &watchState{
		prefix: []byte(MarkerVar + "=" + strconv.Itoa(os.Getppid()) + "-"),
		runs:   map[int]watchedRun{},
		kept:   map[string]bool{},
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		st.parse(sc.Text())
	}
	st.end(watchdogEnd)
	return 0
}

// parse applies one report line.
func (st *watchState) parse(line string) {
	kind, rest, _ := strings.Cut(line, " ")
	pidText, rest, _ := strings.Cut(rest, " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid < 2 {
		return
	}
	var fields []string
	for rest != "" {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return
		}
		v, _ := strconv.Unquote(q)
		fields = append(fields, v)
		rest = strings.TrimPrefix(rest[len(q):], " ")
	}
	switch kind {
	case "d":
		delete(st.runs, pid)
	case "k":
		delete(st.runs, pid)
		if len(fields) == 1 {
			st.kept[fields[0]] = true
		}
	case "r":
		if len(fields) == 0 {
			return
		}
		st.runs[pid] = watchedRun{marker: []byte(fields[0]), cgroups: fields[1:]}
	}
}

// end kills, until none is found or limit has passed, the processes of
// the runs in progress (their groups, sessions and cgroups) and every
// process carrying one of the host's markers that was not kept.
func (st *watchState) end(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		found := 0
		for pid, r := range st.runs {
			if syscall.Kill(-pid, syscall.SIGKILL) == nil {
				found++
			}
			for _, dir := range r.cgroups {
				found += killCgroup(dir)
			}
		}
		found += st.killMatching()
		if found == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killCgroup kills everything in the cgroup dir and returns how many
// processes it still listed.
func killCgroup(dir string) int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0
	}
	n := 0
	if fd, err := unix.Open(filepath.Join(dir, "cgroup.kill"), unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Write(fd, []byte("1"))
		unix.Close(fd)
	}
	for _, f := range bytes.Fields(data) {
		if pid, err := strconv.Atoi(string(f)); err == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	}
	return n
}

// killMatching kills live processes in the session or group of a run in
// progress, or that carry one of the host's markers other than a kept
// one, and returns how many it found.
func (st *watchState) killMatching() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid < 2 {
			continue
		}
		info, ok := readStat(pid)
		if !ok || info.state == 'Z' || info.state == 'X' {
			continue
		}
		_, inGroup := st.runs[info.pgrp]
		_, inSession := st.runs[info.sid]
		match := inGroup || inSession
		if !match {
			env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
			if m := entryWithPrefix(env, st.prefix); m != nil && !st.kept[string(m)] {
				match = true
			}
		}
		if match {
			syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	}
	return n
}

// entryWithPrefix returns the first entry of the NUL-separated
// environment env that starts with prefix, or nil.
func entryWithPrefix(env, prefix []byte) []byte {
	for len(env) > 0 {
		var e []byte
		e, env, _ = bytes.Cut(env, []byte{0})
		if bytes.HasPrefix(e, prefix) {
			return e
		}
	}
	return nil
}
