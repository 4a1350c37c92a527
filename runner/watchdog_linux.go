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
		Env:   []string{},
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

// watchEnd tells the watchdog that a run is over: its tree was ended or
// deliberately kept.
func watchEnd(pid int) {
	watchMu.Lock()
	defer watchMu.Unlock()
	if watchPipe == nil {
		return
	}
	if _, err := watchPipe.WriteString("d " + strconv.Itoa(pid) + "\n"); err != nil {
		watchPipe.Close()
		watchPipe = nil
	}
}

// watchedRun is what the watchdog knows of one run in progress.
type watchedRun struct {
	marker  []byte   // MarkerVar=value, as it stands in /proc/PID/environ
	cgroups []string // cgroup directories holding the tree
}

// watchdog reads the host's reports until the pipe ends (the host is
// gone), then ends the trees of the runs still in progress.
func watchdog() int {
	os.Stdout.WriteString("ready\n")
	os.Stdout.Close()
	runs := map[int]watchedRun{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		parseWatch(sc.Text(), runs)
	}
	if len(runs) > 0 {
		endRuns(runs, watchdogEnd)
	}
	return 0
}

// parseWatch applies one report line to runs.
func parseWatch(line string, runs map[int]watchedRun) {
	kind, rest, _ := strings.Cut(line, " ")
	pidText, rest, _ := strings.Cut(rest, " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid < 2 {
		return
	}
	switch kind {
	case "d":
		delete(runs, pid)
	case "r":
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
		if len(fields) == 0 {
			return
		}
		runs[pid] = watchedRun{marker: []byte(fields[0]), cgroups: fields[1:]}
	}
}

// endRuns kills every process of runs until none is found or limit has
// passed: their groups, their sessions, processes carrying their marker,
// and everything in their cgroups.
func endRuns(runs map[int]watchedRun, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		found := 0
		for pid, r := range runs {
			if syscall.Kill(-pid, syscall.SIGKILL) == nil {
				found++
			}
			for _, dir := range r.cgroups {
				found += killCgroup(dir)
			}
		}
		found += killMatching(runs)
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

// killMatching kills live processes in a run's session or group, or that
// carry a run's marker, and returns how many it found.
func killMatching(runs map[int]watchedRun) int {
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
		_, inGroup := runs[info.pgrp]
		_, inSession := runs[info.sid]
		match := inGroup || inSession
		if !match {
			env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
			for _, r := range runs {
				if hasEntry(env, r.marker) {
					match = true
					break
				}
			}
		}
		if match {
			syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	}
	return n
}

// hasEntry reports whether the NUL-separated environment env holds entry.
func hasEntry(env, entry []byte) bool {
	for len(env) > 0 {
		var e []byte
		e, env, _ = bytes.Cut(env, []byte{0})
		if bytes.Equal(e, entry) {
			return true
		}
	}
	return false
}
