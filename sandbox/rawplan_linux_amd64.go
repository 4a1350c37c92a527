package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The in-process launcher, host side. The host compiles everything the
// namespace wall needs into a program of system calls (paths, mount
// options, the seccomp filter, Landlock attributes, argv and envp, all
// NUL-terminated and laid out in an arena mapped outside the Go heap),
// clones the init with CLONE_VM (no page-table copy, no second Go
// runtime), and the init interprets that program with raw system calls
// (raw_linux_amd64.go). A failed step comes back as the index of its
// operation and an errno; the host renders the same SetupError text as
// the Go trampoline.

// Sizes of the arena.
const (
	rawRegs      = 16
	rawStatusFD  = 3
	rawStackSize = 32 << 10
)

// Registers of the programs.
const (
	regRuleset = 1
	regPath    = 2
	regSock    = 3
	regCgroup  = 4 // and up, one per cgroup joined
)

// Status records (four uint32: kind, x, y, 0).
const (
	rawRecFailed  = 1 // x: the operation, y: errno
	rawRecStarted = 2
	rawRecExited  = 3 // x: exit code, or ^0 when y, a signal, killed it
)

// rawArena is the start of the arena: what both children and the host
// share besides the programs and their data.
type rawArena struct {
	relayOff     uintptr // the relay's program (users only: it enters the user namespace)
	nrelay       uintptr
	initStack    uintptr // top of the init's stack, when the relay clones it
	opsOff, nops uintptr // the init program
	cmdOff, ncmd uintptr // the command's program
	cmdStack     uintptr // top of the command's stack
	initPC       uintptr // the children's entry points
	cmdPC        uintptr
	failOp       int64 // set by the command when its program failed
	failErr      uintptr
	ws           int32
	relayWS      int32
	rec          [4]uint32
	mask         uint64 // an empty signal set
	regs         [rawRegs]uintptr
}

// rawOp is one system call of a program.
type rawOp struct {
	nr   uintptr
	args [6]uintptr
	want uintptr // with opWant, the result expected (else ESRCH)
	// okErr is an errno that counts as success; with opSkip, an error
	// (skipErr, or any when 0) skips the next skip operations.
	okErr, skipErr uint32
	patch          uint32 // with in2 >= 0: where int32(regs[in2]) is stored first
	flags          uint16
	in, inArg      int8 // regs[in] replaces args[inArg]
	in2            int8
	save           int8 // the result goes to regs[save]
	skip           uint8
}

const (
	opIgnore = 1 << iota // every error is ignored
	opSkip
	opWant
)

// rawArg is an argument: a number, or an offset into the arena (rel)
// that becomes an address.
type rawArg struct {
	v   uintptr
	rel bool
}

func num(v uintptr) rawArg { return rawArg{v: v} }

// rawDesc names an operation for a SetupError: the step, and the text
// before the error ("" for the error alone).
type rawDesc struct{ step, what string }

// rawProg is a program being compiled, with its data.
type rawProg struct {
	base  uintptr // offset of data[0] in the arena
	data  []byte
	ptrs  []int // offsets in data holding arena offsets
	ops   []rawOp
	rels  []uint8 // per operation: which args are arena offsets
	descs []rawDesc
	made  map[string]bool // directories made
}

func newRawProg(base uintptr) *rawProg { return &rawProg{base: base, made: map[string]bool{}} }

func (p *rawProg) align() {
	for len(p.data)%8 != 0 {
		p.data = append(p.data, 0)
	}
}

func (p *rawProg) str(s string) rawArg {
	off := p.base + uintptr(len(p.data))
	p.data = append(append(p.data, s...), 0)
	return rawArg{v: off, rel: true}
}

func (p *rawProg) blob(b []byte) rawArg {
	p.align()
	off := p.base + uintptr(len(p.data))
	p.data = append(p.data, b...)
	return rawArg{v: off, rel: true}
}

// strv lays out a NULL-terminated array of pointers to strings.
func (p *rawProg) strv(list []string) rawArg {
	offs := make([]uintptr, len(list))
	for i, s := range list {
		offs[i] = p.str(s).v
	}
	p.align()
	at := len(p.data)
	for _, o := range offs {
		p.ptrs = append(p.ptrs, len(p.data))
		p.data = binary.LittleEndian.AppendUint64(p.data, uint64(o))
	}
	p.data = binary.LittleEndian.AppendUint64(p.data, 0)
	return rawArg{v: p.base + uintptr(at), rel: true}
}

// op adds a system call; the returned operation may be adjusted until the
// next one is added.
func (p *rawProg) op(step, what string, nr uintptr, args ...rawArg) *rawOp {
	o := rawOp{nr: nr, in: -1, inArg: -1, in2: -1, save: -1}
	var rel uint8
	for i, a := range args {
		o.args[i] = a.v
		if a.rel {
			rel |= 1 << i
		}
	}
	p.ops = append(p.ops, o)
	p.rels = append(p.rels, rel)
	p.descs = append(p.descs, rawDesc{step, what})
	return &p.ops[len(p.ops)-1]
}

// mkdirs makes dir and its parents below the new root.
func (p *rawProg) mkdirs(step, what, dir string) {
	var parts []string
	for d := dir; d != "/newroot" && d != "/" && d != "." && !p.made[d]; d = filepath.Dir(d) {
		parts = append(parts, d)
	}
	for i := len(parts) - 1; i >= 0; i-- {
		p.made[parts[i]] = true
		p.op(step, what, unix.SYS_MKDIRAT, num(atFDCWD), p.str(parts[i]), num(0o755)).okErr = uint32(unix.EEXIST)
	}
}

func (p *rawProg) mountpoint(step, what, path string, file bool) {
	if !file {
		p.mkdirs(step, what, path)
		return
	}
	p.mkdirs(step, what, filepath.Dir(path))
	p.op(step, what, unix.SYS_MKNODAT, num(atFDCWD), p.str(path), num(unix.S_IFREG|0o444), num(0)).okErr = uint32(unix.EEXIST)
}

func (p *rawProg) mount(step, what, src, dst, fstype string, flags uintptr, data string) {
	var s, t, d rawArg
	if src != "" {
		s = p.str(src)
	}
	if fstype != "" {
		t = p.str(fstype)
	}
	if data != "" {
		d = p.str(data)
	}
	p.op(step, what, unix.SYS_MOUNT, s, p.str(dst), t, num(flags), d)
}

func (p *rawProg) setattr(step, what, path string, flags, set uintptr) {
	attr := make([]byte, unsafe.Sizeof(unix.MountAttr{}))
	binary.LittleEndian.PutUint64(attr, uint64(set))
	p.op(step, what, unix.SYS_MOUNT_SETATTR, num(atFDCWD), p.str(path), num(flags), p.blob(attr), num(uintptr(len(attr))))
}

// lstatSkip skips the next n operations when path does not exist.
func (p *rawProg) lstatSkip(path string, n uint8, scratch rawArg) {
	o := p.op(StepMounts, "", unix.SYS_STATX, num(atFDCWD), p.str(path), num(unix.AT_SYMLINK_NOFOLLOW), num(0), scratch)
	o.flags, o.skip = opSkip, n
}

const atFDCWD = ^uintptr(99) // AT_FDCWD, -100

// rawStatic is the part of the init program that is the same for every
// run of a wrapper: the root, loopback, and the confinement. chdirOp is
// the operation whose path each run sets.
type rawStatic struct {
	prog    *rawProg
	chdirOp int
	label   string
	userFD  int // the shared user namespace (sharedUserNS), or -1 for root
}

// rawHeader is where static data starts in the arena.
var rawHeader = (unsafe.Sizeof(rawArena{}) + 15) &^ 15

// compileStatic compiles what buildRoot, loopbackUp, dropCaps,
// landlockApply and installSeccomp do in the trampoline.
//
// A network = "allowlist" spec closes the network as NoNetwork does
// (s.netOff: network namespace, loopback, seccomp); with egressPort > 0
// the init also listens on 127.0.0.1:egressPort in the run's network
// namespace and sends the listener to the host on descriptor rawEgressFD
// (wrapRaw's egress), as the trampoline's sendEgressListener does.
func compileStatic(s *Spec, plan *nsPlan, egressPort int) (*rawStatic, error) {
	p := newRawProg(rawHeader)
	scratch := p.blob(make([]byte, 256)) // statx's buffer
	m := func(what string) string { return what }
	// buildRoot.
	p.mount(StepMounts, "make / private", "", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	p.mount(StepMounts, "mount the staging tmpfs", "tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755")
	for _, d := range []string{"/tmp/oldroot", "/tmp/newroot"} {
		p.op(StepMounts, "mkdir "+d, unix.SYS_MKDIRAT, num(atFDCWD), p.str(d), num(0o755))
	}
	p.op(StepMounts, "pivot_root to the staging tmpfs", unix.SYS_PIVOT_ROOT, p.str("/tmp"), p.str("/tmp/oldroot"))
	p.op(StepMounts, "", unix.SYS_CHDIR, p.str("/"))
	p.mount(StepMounts, "mount the new root", "tmpfs", "/newroot", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755")
	p.op(StepMounts, "", unix.SYS_MKNODAT, num(atFDCWD), p.str("/empty"), num(unix.S_IFREG|0o444), num(0)).flags = opIgnore
	const nr = "/newroot"
	const ro = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	for _, mt := range plan.mounts {
		what := m(fmt.Sprintf("%s %s", mt.Kind, mt.Dst))
		dst := nr + mt.Dst
		switch mt.Kind {
		case mLink:
			p.mkdirs(StepMounts, what, filepath.Dir(dst))
			p.op(StepMounts, what, unix.SYS_SYMLINKAT, p.str(mt.Src), num(atFDCWD), p.str(dst))
		case mTmpfs:
			p.mountpoint(StepMounts, what, dst, false)
			p.mount(StepMounts, what, "tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, mt.Data)
		case mBindRO, mBindRW:
			p.mountpoint(StepMounts, what, dst, mt.File)
			p.mount(StepMounts, what, "/oldroot"+mt.Src, dst, "", unix.MS_BIND|unix.MS_REC, "")
			attr := uintptr(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
			if mt.Kind == mBindRO {
				attr = ro
			}
			p.setattr(StepMounts, what, dst, unix.AT_RECURSIVE, attr)
		case mHide:
			p.lstatSkip(dst, 2, scratch)
			if mt.File {
				p.mount(StepMounts, what, "/empty", dst, "", unix.MS_BIND, "")
			} else {
				p.mount(StepMounts, what, "tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0,size=4k")
			}
			p.setattr(StepMounts, what, dst, 0, ro)
		default:
			return nil, fmt.Errorf("sandbox: unknown mount kind %q", mt.Kind)
		}
	}
	// buildDev.
	dev := nr + "/dev"
	p.mountpoint(StepMounts, "/dev", dev, false)
	p.mount(StepMounts, "/dev", "tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755")
	for _, d := range devices {
		p.mountpoint(StepMounts, "/dev", nr+d, true)
		p.mount(StepMounts, "/dev: bind "+d, "/oldroot"+d, nr+d, "", unix.MS_BIND, "")
	}
	for _, d := range []string{"/pts", "/shm"} {
		p.op(StepMounts, "/dev", unix.SYS_MKDIRAT, num(atFDCWD), p.str(dev+d), num(0o755))
	}
	p.mount(StepMounts, "/dev: devpts", "devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	p.mount(StepMounts, "/dev", "tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
	for _, l := range [][2]string{{"ptmx", "pts/ptmx"}, {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}} {
		p.op(StepMounts, "/dev", unix.SYS_SYMLINKAT, p.str(l[1]), num(atFDCWD), p.str(dev+"/"+l[0]))
	}
	p.setattr(StepMounts, "/dev", dev, 0, unix.MOUNT_ATTR_RDONLY)
	p.op(StepMounts, "mkdir /proc", unix.SYS_MKDIRAT, num(atFDCWD), p.str(nr+"/proc"), num(0o555))
	p.mount(StepMounts, "mount a new /proc (a /proc with hidden parts, as in some containers, prevents it)", "proc", nr+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	for _, pp := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"} {
		p.lstatSkip(nr+pp, 2, scratch)
		p.mount(StepMounts, "bind "+pp, nr+pp, nr+pp, "", unix.MS_BIND|unix.MS_REC, "")
		p.setattr(StepMounts, "make "+pp+" read-only", nr+pp, unix.AT_RECURSIVE, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	}
	p.setattr(StepMounts, "make / read-only", nr, 0, unix.MOUNT_ATTR_RDONLY)
	p.op(StepMounts, "", unix.SYS_CHDIR, p.str(nr))
	p.op(StepMounts, "pivot_root to the new root", unix.SYS_PIVOT_ROOT, p.str("."), p.str("."))
	p.op(StepMounts, "detach the host's root", unix.SYS_UMOUNT2, p.str("."), num(unix.MNT_DETACH))
	p.op(StepMounts, "chdir /", unix.SYS_CHDIR, p.str("/"))
	// loopbackUp, and sendEgressListener.
	if s.netOff() {
		p.op(StepNetwork, "", unix.SYS_SOCKET, num(unix.AF_INET), num(unix.SOCK_DGRAM|unix.SOCK_CLOEXEC), num(0)).save = regSock
		ifr := make([]byte, 40)
		copy(ifr, "lo")
		binary.LittleEndian.PutUint16(ifr[16:], unix.IFF_UP|unix.IFF_LOOPBACK)
		o := p.op(StepNetwork, "", unix.SYS_IOCTL, num(0), num(unix.SIOCSIFFLAGS), p.blob(ifr))
		o.in, o.inArg = regSock, 0
		o = p.op(StepNetwork, "", unix.SYS_CLOSE, num(0))
		o.in, o.inArg, o.flags = regSock, 0, opIgnore
		if s.Allowlist && egressPort > 0 {
			p.egress(egressPort)
		}
	}
	st := &rawStatic{prog: p, label: s.label(), userFD: -1}
	st.chdirOp = len(p.ops)
	p.op(StepDir, "", unix.SYS_CHDIR, num(0)) // the path is set per run
	p.op(StepDir, "", unix.SYS_SETHOSTNAME, p.str("sandbox"), num(7)).flags = opIgnore
	// dropCaps.
	p.op(StepCaps, "clear ambient capabilities", unix.SYS_PRCTL, num(unix.PR_CAP_AMBIENT), num(unix.PR_CAP_AMBIENT_CLEAR_ALL), num(0), num(0), num(0))
	for c := 0; c <= capLast(); c++ {
		p.op(StepCaps, fmt.Sprintf("drop capability %d from the bounding set", c), unix.SYS_PRCTL, num(unix.PR_CAPBSET_DROP), num(uintptr(c)), num(0), num(0), num(0))
	}
	hdr := make([]byte, 8)
	binary.LittleEndian.PutUint32(hdr, unix.LINUX_CAPABILITY_VERSION_3)
	p.op(StepCaps, "capset", unix.SYS_CAPSET, p.blob(hdr), p.blob(make([]byte, 24)))
	p.op(StepNoNewPrv, "", unix.SYS_PRCTL, num(unix.PR_SET_NO_NEW_PRIVS), num(1), num(0), num(0), num(0))
	if err := p.landlock(s, plan.rules, egressPort); err != nil {
		return nil, err
	}
	if s.netOff() || s.Isolate {
		prog, err := filter(s.netOff())
		if err != nil {
			return nil, err
		}
		code := unsafe.Slice((*byte)(unsafe.Pointer(&prog[0])), len(prog)*int(unsafe.Sizeof(prog[0])))
		f := p.blob(code)
		fprog := make([]byte, 16)
		binary.LittleEndian.PutUint16(fprog, uint16(len(prog)))
		p.align()
		p.ptrs = append(p.ptrs, len(p.data)+8)
		binary.LittleEndian.PutUint64(fprog[8:], uint64(f.v))
		p.op(StepSeccomp, "", unix.SYS_SECCOMP, num(unix.SECCOMP_SET_MODE_FILTER), num(0), p.blob(fprog))
	}
	return st, nil
}

// rawEgressFD is the init's descriptor of the Unix socket to the host
// that the egress listener is sent on (the status descriptor's next).
const rawEgressFD = rawStatusFD + 1

// egress compiles sendEgressListener: socket, bind 127.0.0.1:port,
// listen, sendmsg of the listener with SCM_RIGHTS on rawEgressFD, and
// close of both.
func (p *rawProg) egress(port int) {
	const step = StepEgress
	where := fmt.Sprintf("listen on 127.0.0.1:%d", port)
	p.op(step, "socket", unix.SYS_SOCKET, num(unix.AF_INET), num(unix.SOCK_STREAM|unix.SOCK_CLOEXEC), num(0)).save = regSock
	sa := make([]byte, 16) // struct sockaddr_in
	binary.LittleEndian.PutUint16(sa, unix.AF_INET)
	binary.BigEndian.PutUint16(sa[2:], uint16(port))
	copy(sa[4:], []byte{127, 0, 0, 1})
	o := p.op(step, where, unix.SYS_BIND, num(0), p.blob(sa), num(16))
	o.in, o.inArg = regSock, 0
	o = p.op(step, where, unix.SYS_LISTEN, num(0), num(128))
	o.in, o.inArg = regSock, 0
	// struct msghdr {name, namelen, iov, iovlen, control, controllen,
	// flags}, one iovec of "L", and a cmsghdr {len, level, type} with
	// the descriptor, patched in from the register.
	body := p.blob([]byte("L"))
	iov := make([]byte, 16)
	binary.LittleEndian.PutUint64(iov[8:], 1)
	p.align()
	p.ptrs = append(p.ptrs, len(p.data))
	binary.LittleEndian.PutUint64(iov, uint64(body.v))
	iovArg := p.blob(iov)
	cmsg := make([]byte, unix.CmsgSpace(4))
	binary.LittleEndian.PutUint64(cmsg, uint64(unix.CmsgLen(4)))
	binary.LittleEndian.PutUint32(cmsg[8:], unix.SOL_SOCKET)
	binary.LittleEndian.PutUint32(cmsg[12:], unix.SCM_RIGHTS)
	cmsgArg := p.blob(cmsg)
	msg := make([]byte, 56)
	binary.LittleEndian.PutUint64(msg[24:], 1)
	binary.LittleEndian.PutUint64(msg[40:], uint64(len(cmsg)))
	p.align()
	at := len(p.data)
	p.ptrs = append(p.ptrs, at+16, at+32)
	binary.LittleEndian.PutUint64(msg[16:], uint64(iovArg.v))
	binary.LittleEndian.PutUint64(msg[32:], uint64(cmsgArg.v))
	o = p.op(step, "send the listener to the host", unix.SYS_SENDMSG, num(rawEgressFD), p.blob(msg), num(0))
	o.in2, o.patch = regSock, uint32(cmsgArg.v+16)
	o = p.op(step, "", unix.SYS_CLOSE, num(0))
	o.in, o.inArg, o.flags = regSock, 0, opIgnore
	p.op(step, "", unix.SYS_CLOSE, num(rawEgressFD)).flags = opIgnore
}

// landlock compiles landlockApply inside a namespace (ns): the same
// decisions, taken now. Under Allowlist TCP is left to the run's network
// namespace, as there.
func (p *rawProg) landlock(s *Spec, paths []PathRule, egressPort int) error {
	if !s.Filesystem && !s.netOff() {
		return nil
	}
	abi := llABI()
	if s.NoNetwork && !s.BestEffort && abi < 4 {
		return &SetupError{Step: StepLandlock, Msg: fmt.Errorf("Landlock ABI %d cannot restrict the network (4 is needed): %w", abi, ErrUnavailable).Error()}
	}
	if !s.BestEffort && abi < llNeededABI {
		return &SetupError{Step: StepLandlock, Msg: fmt.Errorf("Landlock ABI %d is older than %d, which this profile needs (set best_effort to run with what the kernel has): %w", abi, llNeededABI, ErrUnavailable).Error()}
	}
	supFS, supNet, supScoped := llSupported(abi)
	var attr llRuleset
	attr.scoped = llScopedAll & supScoped
	if s.Filesystem {
		attr.handledFS = llFSAllV6 & supFS
	}
	if s.NoNetwork {
		attr.handledNet = llNetTCP & supNet
	}
	if attr.handledFS == 0 && attr.handledNet == 0 && attr.scoped == 0 {
		return nil
	}
	b := make([]byte, 24)
	binary.LittleEndian.PutUint64(b, attr.handledFS)
	binary.LittleEndian.PutUint64(b[8:], attr.handledNet)
	binary.LittleEndian.PutUint64(b[16:], attr.scoped)
	p.op(StepLandlock, "landlock_create_ruleset", unix.SYS_LANDLOCK_CREATE_RULESET, p.blob(b), num(24), num(0)).save = regRuleset
	if attr.handledFS != 0 {
		for _, r := range paths {
			access := r.access() & attr.handledFS
			if access == 0 {
				continue
			}
			o := p.op(StepLandlock, "open "+r.Path+" for a Landlock rule", unix.SYS_OPENAT, num(atFDCWD), p.str(r.Path), num(unix.O_PATH|unix.O_CLOEXEC), num(0))
			o.save, o.flags, o.skipErr, o.skip = regPath, opSkip, uint32(unix.ENOENT), 2
			pb := make([]byte, 16)
			binary.LittleEndian.PutUint64(pb, access)
			at := p.blob(pb)
			o = p.op(StepLandlock, "landlock_add_rule "+r.Path, unix.SYS_LANDLOCK_ADD_RULE, num(0), num(unix.LANDLOCK_RULE_PATH_BENEATH), at, num(0))
			o.in, o.inArg, o.in2, o.patch = regRuleset, 0, regPath, uint32(at.v+8)
			o = p.op(StepLandlock, "", unix.SYS_CLOSE, num(0))
			o.in, o.inArg, o.flags = regPath, 0, opIgnore
		}
	}
	if s.Allowlist && egressPort > 0 && attr.handledNet != 0 {
		pb := make([]byte, 16) // struct landlock_net_port_attr
		binary.LittleEndian.PutUint64(pb, llNetConnectTCP)
		binary.LittleEndian.PutUint64(pb[8:], uint64(egressPort))
		o := p.op(StepLandlock, fmt.Sprintf("landlock_add_rule for TCP port %d", egressPort), unix.SYS_LANDLOCK_ADD_RULE, num(0), num(llRuleNetPort), p.blob(pb), num(0))
		o.in, o.inArg = regRuleset, 0
	}
	o := p.op(StepLandlock, "landlock_restrict_self", unix.SYS_LANDLOCK_RESTRICT_SELF, num(0), num(0))
	o.in, o.inArg = regRuleset, 0
	o = p.op(StepLandlock, "", unix.SYS_CLOSE, num(0))
	o.in, o.inArg, o.flags = regRuleset, 0, opIgnore
	return nil
}

// capLast is the kernel's last capability.
var capLast = sync.OnceValue(func() int {
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= 0 && n < 64 {
			return n
		}
	}
	return unix.CAP_LAST_CAP
})
