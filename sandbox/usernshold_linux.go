package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// usernsArg is the hidden first argument of the user namespace holder.
const usernsArg = "__agentexec_userns"

// holdUserNS is the holder's whole life: started in a new user
// namespace, it maps the user's uid and gid to themselves (it was just
// executed, so its memory is dumpable and its /proc files its user's,
// which the host's are not), says so on stdout, and exits when its stdin
// closes.
func holdUserNS(uid, gid string) {
	u, err1 := strconv.Atoi(uid)
	g, err2 := strconv.Atoi(gid)
	if err1 != nil || err2 != nil {
		os.Exit(2)
	}
	if err := mapIDs(u, g); err != nil {
		fmt.Fprintln(os.Stdout, "error:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stdout, "ok")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// The user namespace that the in-process launcher's runs share, for users
// other than root (root needs none): created once per process.
var userNS struct {
	sync.Mutex
	fd  int // a descriptor of it, or -1 before it exists
	err error
}

func init() { userNS.fd = -1 }

// sharedUserNS returns a descriptor of a user namespace in which the
// user's uid and gid map to themselves and that the user owns, so that
// it holds every capability there. The host cannot write the id maps of
// a namespace that only its own clones are in (they share its memory,
// which is not dumpable, so their /proc files belong to root); a holder
// process, exe started once in the mode holdUserNS, writes them, and the
// descriptor keeps the namespace after the holder exits.
func sharedUserNS(exe string) (int, error) {
	userNS.Lock()
	defer userNS.Unlock()
	if userNS.fd >= 0 || userNS.err != nil {
		return userNS.fd, userNS.err
	}
	userNS.fd, userNS.err = newUserNS(exe)
	return userNS.fd, userNS.err
}

func newUserNS(exe string) (int, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	defer inR.Close()
	defer inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	defer outR.Close()
	pid, err := syscall.ForkExec(exe, []string{exe, usernsArg, strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())}, &syscall.ProcAttr{
		Env:   []string{"GOMAXPROCS=1"},
		Files: []uintptr{inR.Fd(), outW.Fd(), outW.Fd()},
		// CAP_SYS_ADMIN in the new namespace survives the exec as an
		// ambient capability: writing setgroups needs it.
		Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, Pdeathsig: syscall.SIGKILL, AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN}},
	})
	outW.Close()
	if err != nil {
		return -1, fmt.Errorf("start the user namespace holder: %w", err)
	}
	defer func() {
		inW.Close()
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
	}()
	line, _ := bufio.NewReader(outR).ReadString('\n')
	if line != "ok\n" {
		return -1, fmt.Errorf("the user namespace holder failed: %q", line)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the holder's user namespace: %w", err)
	}
	return fd, nil
}
