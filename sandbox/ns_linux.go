package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The namespace wall. The runner starts the trampoline in new user, mount,
// PID, IPC and UTS namespaces (and a network namespace holding only
// loopback for network-off profiles). The trampoline is the PID
// namespace's init: it builds a new root on a tmpfs holding only the
// system directories (read-only), the workspace, a private /tmp, an empty
// HOME with a short read-only allow list, the tool cache, a minimal /dev
// and a fresh /proc; then it drops every capability on its one locked
// thread, confines that thread (no_new_privs, Landlock, seccomp, limits)
// and starts the program from it, which inherits all of it. It stays as
// init: it reaps orphans, passes the program's exit status to the host
// on its status descriptor and exits when the program does, and the
// kernel then kills everything left in the namespace. A SIGKILL of the
// process group from the host does the same.

// systemDirs are the host directories every namespaced profile sees
// read-only (those that exist; a symbolic link is recreated as one).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix"}

// linkedFiles are files in the system directories that are often symbolic
// links into directories the sandbox does not show (/run): their targets
// are shown read-only.
var linkedFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/localtime", "/etc/mtab"}

// Mount kinds.
const (
	mTmpfs  = "tmpfs" // Data: mount options
	mBindRO = "ro"
	mBindRW = "rw"
	mLink   = "link" // Src: the link's text
	mHide   = "hide" // File: a file rather than a directory
	mDevice = "dev"
)

// Mount is one step of building the sandbox's root, in host paths: Dst
// is where it appears inside, Src what is shown there.
type Mount struct {
	Kind string `json:"k"`
	Src  string `json:"s,omitempty"`
	Dst  string `json:"d"`
	File bool   `json:"f,omitempty"`
	Data string `json:"o,omitempty"`
}

// nsPlan is a spec's namespace layout, worked out once per wrapper.
type nsPlan struct {
	mounts   []Mount
	rules    []PathRule // Landlock rules, in the sandbox's paths
	env      []string   // variables set for the program
	writable []string   // paths the program may write (for the failure note)
	visible  []string   // paths it may read
}

// real returns p with symbolic links resolved, or p when it does not
// exist.
func real(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// planNamespaces works out the mounts of s.
func planNamespaces(s *Spec) (*nsPlan, error) {
	p := &nsPlan{}
	var binds []Mount
	add := func(m Mount) { p.mounts = append(p.mounts, m) }
	bind := func(src, dst string, write bool) {
		fi, err := os.Stat(src)
		if err != nil {
			return
		}
		kind := mBindRO
		if write {
			kind = mBindRW
		}
		m := Mount{Kind: kind, Src: real(src), Dst: filepath.Clean(dst), File: !fi.IsDir()}
		add(m)
		binds = append(binds, m)
		if r := real(dst); r != m.Dst {
			m.Dst = r // reached through a link: shown at both paths
			add(m)
			binds = append(binds, m)
		}
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				add(Mount{Kind: mLink, Src: t, Dst: d})
			}
		default:
			bind(d, d, false)
		}
	}
	for _, f := range linkedFiles {
		r := real(f)
		shown := false
		for _, b := range binds {
			shown = shown || within(r, b.Src)
		}
		special := within(r, "/proc") || within(r, "/dev") || within(r, "/sys")
		if !shown && !special && r != f {
			bind(r, r, false)
		}
	}
	home := s.HomeDir
	if home != "" && filepath.Clean(home) != "/" {
		add(Mount{Kind: mTmpfs, Dst: filepath.Clean(home), Data: "mode=0700"})
		if r := real(home); r != filepath.Clean(home) {
			add(Mount{Kind: mTmpfs, Dst: r, Data: "mode=0700"})
		}
		p.writable = append(p.writable, home)
	}
	add(Mount{Kind: mTmpfs, Dst: "/tmp", Data: tmpData(s.TmpBytes, "1777")})
	add(Mount{Kind: mTmpfs, Dst: "/var/tmp", Data: tmpData(s.TmpBytes, "1777")})
	p.writable = append(p.writable, "/tmp", "/var/tmp")
	for _, ro := range s.ReadOnly {
		if ro != "/" { // "/" is the system directories here
			bind(ro, ro, false)
			p.visible = append(p.visible, ro)
		}
	}
	for _, h := range s.Home {
		bind(h, h, false)
		p.visible = append(p.visible, h)
	}
	for _, rw := range s.ReadWrite {
		bind(rw, rw, true)
		p.writable = append(p.writable, rw)
	}
	if s.Cache != "" {
		if err := os.MkdirAll(s.Cache, 0o700); err == nil {
			bind(s.Cache, s.Cache, true)
			p.writable = append(p.writable, s.Cache)
		}
	}
	// Hidden paths are covered wherever a bind shows them, under their
	// own path and the one links lead to.
	for _, h := range s.Hidden {
		for _, c := range slices.Compact([]string{filepath.Clean(h), real(h)}) {
			fi, err := os.Stat(c)
			if err != nil {
				continue
			}
			for _, b := range binds {
				if b.Kind == mHide || !within(c, b.Src) {
					continue
				}
				rel, _ := filepath.Rel(b.Src, c)
				add(Mount{Kind: mHide, Dst: filepath.Join(b.Dst, rel), File: !fi.IsDir()})
			}
		}
	}
	// Parents before children; at one path a tmpfs, then binds, then
	// hides.
	rank := map[string]int{mLink: 0, mTmpfs: 1, mBindRO: 2, mBindRW: 2, mHide: 3}
	slices.SortStableFunc(p.mounts, func(a, b Mount) int {
		da, db := strings.Count(a.Dst, "/"), strings.Count(b.Dst, "/")
		if a.Dst == "/" {
			da = 0
		}
		if b.Dst == "/" {
			db = 0
		}
		if da != db {
			return da - db
		}
		return rank[a.Kind] - rank[b.Kind]
	})
	p.mounts = slices.CompactFunc(p.mounts, func(a, b Mount) bool { return a == b })
	// Landlock inside: everything shown is readable, the writable places
	// writable (without device-node rights), the devices usable.
	p.rules = []PathRule{{Path: "/"}}
	for _, m := range p.mounts {
		if m.Kind == mBindRW || (m.Kind == mTmpfs && m.Dst != "/dev") {
			p.rules = append(p.rules, PathRule{Path: m.Dst, Write: true, File: m.File})
		}
	}
	for _, d := range devices {
		p.rules = append(p.rules, PathRule{Path: d, Write: true, File: true})
	}
	p.rules = append(p.rules, PathRule{Path: "/dev/pts", Write: true}, PathRule{Path: "/dev/shm", Write: true})
	p.env = append(p.env, "TMPDIR=/tmp", EnvVar+"="+s.label())
	p.env = append(p.env, cacheEnv(s.Cache)...)
	p.visible = append(p.visible, systemDirs...)
	return p, nil
}

func tmpData(size int64, mode string) string {
	d := "mode=" + mode
	if size > 0 {
		d += ",size=" + strconv.FormatInt(size, 10)
	}
	return d
}

// cacheEnv points the usual tool caches at dir.
func cacheEnv(dir string) []string {
	if dir == "" {
		return nil
	}
	return []string{
		"XDG_CACHE_HOME=" + filepath.Join(dir, "xdg"),
		"GOCACHE=" + filepath.Join(dir, "go-build"),
		"GOMODCACHE=" + filepath.Join(dir, "go-mod"),
		"npm_config_cache=" + filepath.Join(dir, "npm"),
		"CARGO_HOME=" + filepath.Join(dir, "cargo"),
		"PIP_CACHE_DIR=" + filepath.Join(dir, "pip"),
	}
}

// nsCloneFlags are the namespaces of a run.
func nsCloneFlags(noNetwork bool) uintptr {
	f := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
	if noNetwork {
		f |= syscall.CLONE_NEWNET
	}
	return f
}

// nsAttr sets the clone flags, and keeps for the trampoline, as ambient
// capabilities of the new user namespace, those it needs to build the
// root after it executes (it drops them all before the program starts).
// The trampoline maps its own uid and gid (the user's, root staying 0):
// the host cannot write the maps of a child that is, like the host,
// non-dumpable.
//
// Root needs no user namespace to build the others, and gets none: Go
// starts a process that creates one with a full fork of the host rather
// than a vfork, which made that start cost several times a plain one.
// The sandboxed root then holds no capability in any namespace, as a
// user does.
func nsAttr(noNetwork bool) func(*syscall.SysProcAttr) {
	userNS := userNamespace()
	return func(a *syscall.SysProcAttr) {
		a.Cloneflags |= nsCloneFlags(noNetwork)
		if userNS {
			a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_NET_ADMIN}
		} else {
			a.Cloneflags &^= syscall.CLONE_NEWUSER
		}
	}
}

// userNamespace says whether the wall needs a user namespace: for anyone
// but root.
func userNamespace() bool { return os.Geteuid() != 0 }

// mapIDs maps the user's uid and gid to themselves in the new user
// namespace, from inside it.
func mapIDs(uid, gid int) error {
	for _, w := range []struct{ file, data string }{
		{"/proc/self/setgroups", "deny"},
		{"/proc/self/gid_map", fmt.Sprintf("%d %d 1\n", gid, gid)},
		{"/proc/self/uid_map", fmt.Sprintf("%d %d 1\n", uid, uid)},
	} {
		if err := os.WriteFile(w.file, []byte(w.data), 0); err != nil {
			return err
		}
	}
	return nil
}

// Steps of building the namespace wall, named in SetupErrors.
const (
	StepMounts  = "build the sandbox's file system"
	StepIDs     = "map the user in the user namespace"
	StepNetwork = "bring up loopback"
	StepEgress  = "listen for the egress proxy"
	StepCaps    = "drop capabilities"
	StepDir     = "enter the working directory"
)

// buildRoot builds the new root from l.Mounts and makes it the root.
func buildRoot(l *launch) error {
	must := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return must("make / private", err)
	}
	// Staging: a tmpfs as the root, the host's root below it at /oldroot,
	// the new root at /newroot.
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return must("mount the staging tmpfs", err)
	}
	for _, d := range []string{"/tmp/oldroot", "/tmp/newroot"} {
		if err := unix.Mkdir(d, 0o755); err != nil {
			return must("mkdir "+d, err)
		}
	}
	if err := unix.PivotRoot("/tmp", "/tmp/oldroot"); err != nil {
		return must("pivot_root to the staging tmpfs", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/newroot", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return must("mount the new root", err)
	}
	if fd, err := unix.Open("/empty", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o444); err == nil {
		unix.Close(fd)
	}
	const nr = "/newroot"
	for _, m := range l.Mounts {
		if err := doMount(nr, m); err != nil {
			return must(fmt.Sprintf("%s %s", m.Kind, m.Dst), err)
		}
	}
	if err := buildDev(nr); err != nil {
		return must("/dev", err)
	}
	if err := unix.Mkdir(nr+"/proc", 0o555); err != nil {
		return must("mkdir /proc", err)
	}
	if err := unix.Mount("proc", nr+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return must("mount a new /proc (a /proc with hidden parts, as in some containers, prevents it)", err)
	}
	// The kernel's knobs read-only: uid 0 may write many of them by its
	// file mode alone, without a capability.
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"} {
		if _, err := os.Lstat(nr + p); err != nil {
			continue
		}
		if err := unix.Mount(nr+p, nr+p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return must("bind "+p, err)
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, nr+p, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}); err != nil {
			return must("make "+p+" read-only", err)
		}
	}
	// The new root itself (its directories are mount points) read-only.
	if err := unix.MountSetattr(unix.AT_FDCWD, nr, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return must("make / read-only", err)
	}
	if err := unix.Chdir(nr); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return must("pivot_root to the new root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return must("detach the host's root", err)
	}
	return must("chdir /", unix.Chdir("/"))
}

// mkdirAll creates dir and its parents (on the new root's tmpfs mounts).
func mkdirAll(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// mountpoint creates an empty file or directory at p to mount over.
func mountpoint(p string, file bool) error {
	if !file {
		return mkdirAll(p)
	}
	if err := mkdirAll(filepath.Dir(p)); err != nil {
		return err
	}
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
	if err == nil {
		unix.Close(fd)
	} else if _, serr := os.Stat(p); serr != nil {
		return err
	}
	return nil
}

func doMount(nr string, m Mount) error {
	dst := nr + m.Dst
	const ro = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	switch m.Kind {
	case mLink:
		if err := mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		return unix.Symlink(m.Src, dst)
	case mTmpfs:
		if err := mountpoint(dst, false); err != nil {
			return err
		}
		return unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, m.Data)
	case mBindRO, mBindRW:
		if err := mountpoint(dst, m.File); err != nil {
			return err
		}
		if err := unix.Mount("/oldroot"+m.Src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if m.Kind == mBindRO {
			attr = ro
		}
		return unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr})
	case mHide:
		if _, err := os.Lstat(dst); err != nil {
			return nil // not there: nothing to hide
		}
		if m.File {
			if err := unix.Mount("/empty", dst, "", unix.MS_BIND, ""); err != nil {
				return err
			}
		} else if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0,size=4k"); err != nil {
			return err
		}
		return unix.MountSetattr(unix.AT_FDCWD, dst, 0, &unix.MountAttr{Attr_set: ro})
	}
	return fmt.Errorf("unknown mount kind %q", m.Kind)
}

// buildDev makes the minimal /dev: the usual devices bound from the host,
// a new devpts instance, a private /dev/shm and the usual links.
func buildDev(nr string) error {
	dev := nr + "/dev"
	if err := mountpoint(dev, false); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return err
	}
	for _, d := range devices {
		if err := mountpoint(nr+d, true); err != nil {
			return err
		}
		if err := unix.Mount("/oldroot"+d, nr+d, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", d, err)
		}
	}
	for _, d := range []string{"/pts", "/shm"} {
		if err := unix.Mkdir(dev+d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	if err := unix.Mount("tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return err
	}
	for name, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := unix.Symlink(target, dev+"/"+name); err != nil {
			return err
		}
	}
	return unix.MountSetattr(unix.AT_FDCWD, dev, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
}

// loopbackUp brings up lo in the new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropCaps empties every capability set of the calling thread: ambient,
// bounding, then effective, permitted and inheritable.
func dropCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if err == unix.EINVAL {
			break // past the kernel's last capability
		}
		// Without CAP_SETPCAP (a container that dropped it, a nested
		// sandbox) a capability already out of the bounding set needs no
		// dropping.
		// (The kernel checks the permission before the number, so the
		// end of the list shows as EINVAL from the read.)
		if err == unix.EPERM {
			in, rerr := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
			if rerr == unix.EINVAL {
				break
			}
			if rerr == nil && in == 0 {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
