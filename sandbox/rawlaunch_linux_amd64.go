package sandbox

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"github.com/agentexec/agentexec/runner"
	"golang.org/x/sys/unix"
)

// StepStart names the first steps of the in-process launcher's init
// (descriptors, session, parent death signal) in SetupErrors.
const StepStart = "start the sandbox's init"

// rawRun is one run through the in-process launcher.
type rawRun struct {
	st     *rawStatic
	spec   Spec
	path   string
	argv   []string
	env    []string
	procs  []string // cgroup.procs files to join
	nproc  bool
	memCg  bool
	status *os.File // read end of the status pipe
	remove func()   // removes the cgroups

	mem     []byte // the arena, until the init is reaped
	npre    int
	run     *rawProg // per-run operations: npre before the static ones, the command's after
	cwd     string
	started bool
}

// wrapRaw prepares one run of s through the in-process launcher.
//
// egress, when not nil, is the child's end of the Unix socket on which an
// init compiled with an egress port sends its listener; it becomes
// descriptor rawEgressFD.
func wrapRaw(st *rawStatic, s Spec, plan *nsPlan, egress *os.File, path string, argv, env []string) (*runner.Wrapped, error) {
	r := &rawRun{st: st, spec: s, path: path, argv: argv, env: withEnv(env, plan.env), remove: func() {}}
	var moved string
	if s.Processes > 0 || s.MemoryBytes > 0 {
		procs, remove, capped, memLimited := newCgroups(&s)
		r.procs, r.remove, r.memCg, r.nproc = procs, remove, memLimited, !capped
		if len(procs) > 0 {
			moved = filepath.Dir(procs[0])
		}
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		r.remove()
		return nil, err
	}
	r.status = statusR
	files := []*os.File{statusW}
	if egress != nil {
		files = append(files, egress)
	}
	return &runner.Wrapped{
		Path: path, Argv: argv, Env: r.env,
		Files:   files,
		Cgroup:  moved,
		Start:   r.start,
		Started: r.startedFn,
		Exited:  r.exited,
		Done:    r.done,
		Finish:  func(res *runner.Result, tail []byte) string { return noteDenied(&r.spec, plan, res, tail) },
	}, nil
}

// start compiles the run's own operations, lays out the arena and clones
// the init.
func (r *rawRun) start(dir string, files []uintptr, sys *syscall.SysProcAttr) (int, error) {
	cwd := dir
	if cwd == "" || !filepath.IsAbs(cwd) {
		wd, err := os.Getwd()
		if err != nil {
			return 0, err
		}
		cwd = filepath.Join(wd, cwd)
	}
	if c, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = c
	}
	r.cwd = cwd
	st := r.st.prog
	p := newRawProg(st.base + uintptr(len(st.data)))
	r.run = p
	// Descriptors: files[i] becomes i (0, 1 and 2 inherited by the
	// command, the others close-on-exec), everything else is closed. A
	// user's relay also gets the shared user namespace, after them.
	user := r.st.userFD >= 0
	if user {
		files = append(files[:len(files):len(files)], uintptr(r.st.userFD))
	}
	fd := make([]int, len(files))
	next := len(files)
	for i, f := range files {
		fd[i] = int(f)
		next = max(next, int(f)+1)
	}
	for i := range fd {
		if fd[i] < i {
			p.op(StepStart, "pass the descriptors", unix.SYS_DUP3, num(uintptr(fd[i])), num(uintptr(next)), num(unix.O_CLOEXEC))
			fd[i] = next
			next++
		}
	}
	for i := range fd {
		cloexec := uintptr(0)
		if i > 2 {
			cloexec = unix.O_CLOEXEC
		}
		if fd[i] == i {
			p.op(StepStart, "pass the descriptors", unix.SYS_FCNTL, num(uintptr(i)), num(unix.F_SETFD), num(cloexec/unix.O_CLOEXEC*unix.FD_CLOEXEC))
		} else {
			p.op(StepStart, "pass the descriptors", unix.SYS_DUP3, num(uintptr(fd[i])), num(uintptr(i)), num(cloexec))
		}
	}
	p.op(StepStart, "close the other descriptors", unix.SYS_CLOSE_RANGE, num(uintptr(len(files))), num(^uintptr(0)>>32), num(0))
	if sys != nil {
		if sys.Setsid {
			p.op(StepStart, "setsid", unix.SYS_SETSID)
		}
		if sys.Setpgid {
			p.op(StepStart, "setpgid", unix.SYS_SETPGID, num(0), num(uintptr(sys.Pgid)))
		}
		if sys.Setctty {
			p.op(StepStart, "set the controlling terminal", unix.SYS_IOCTL, num(uintptr(sys.Ctty)), num(unix.TIOCSCTTY), num(1))
		}
	}
	// (The parent is outside the new PID namespace: getppid says 0
	// whether it is alive or not, so there is nothing to check after
	// this; the host waits for its child before it can exit normally.)
	p.op(StepStart, "set the parent death signal", unix.SYS_PRCTL, num(unix.PR_SET_PDEATHSIG), num(uintptr(unix.SIGKILL)), num(0), num(0), num(0))
	nrelay := 0
	if user {
		nsfd := uintptr(len(files) - 1)
		p.op(StepIDs, "enter the user namespace", unix.SYS_SETNS, num(nsfd), num(unix.CLONE_NEWUSER))
		p.op(StepStart, "", unix.SYS_CLOSE, num(nsfd)).flags = opIgnore
		p.op(StepStart, "create the namespaces", unix.SYS_UNSHARE, num(nsCloneFlags(r.spec.netOff())&^unix.CLONE_NEWUSER))
		nrelay = len(p.ops)
		// The init's own, its parent being the relay.
		p.op(StepStart, "set the parent death signal", unix.SYS_PRCTL, num(unix.PR_SET_PDEATHSIG), num(uintptr(unix.SIGKILL)), num(0), num(0), num(0))
	}
	dfl := p.blob(make([]byte, 32))
	for _, sig := range resetSignals() {
		p.op(StepStart, "", unix.SYS_RT_SIGACTION, num(uintptr(sig)), dfl, num(0), num(8)).flags = opIgnore
	}
	// The cgroups are opened now (the new root does not show them) and
	// joined by the command.
	for i, procs := range r.procs {
		p.op(StepCgroup, "", unix.SYS_OPENAT, num(atFDCWD), p.str(procs), num(unix.O_WRONLY|unix.O_CLOEXEC), num(0)).save = int8(regCgroup + i)
	}
	r.npre = len(p.ops)
	cwdArg := p.str(cwd)
	// The command's program.
	zero := p.str("0")
	for i := range r.procs {
		o := p.op(StepCgroup, "", unix.SYS_WRITE, num(0), zero, num(1))
		o.in, o.inArg = int8(regCgroup+i), 0
	}
	r.rlimits(p)
	p.op(StepExec, r.path, unix.SYS_EXECVE, p.str(r.path), p.strv(r.argv), p.strv(r.env))
	cloneOp := len(p.ops)
	p.op(StepExec, r.path, unix.SYS_CLONE) // only names the clone of the command in errors
	if rawTestEdit != nil {
		n := len(p.ops)
		rawTestEdit(p) // operations it adds go first
		r.npre += len(p.ops) - n
		cloneOp += len(p.ops) - n
	}

	// The arena: header, static data, run data, operations, two stacks.
	pre, cmd := p.ops[:r.npre], p.ops[r.npre:cloneOp]
	opSize := unsafe.Sizeof(rawOp{})
	dataEnd := (p.base + uintptr(len(p.data)) + 15) &^ 15
	opsOff := dataEnd
	cmdOff := opsOff + uintptr(len(pre)+len(st.ops))*opSize
	stacks := (cmdOff + uintptr(len(cmd))*opSize + 128 + 4095) &^ 4095
	size := stacks + 3*rawStackSize // the relay's, the init's, the command's
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0, err
	}
	r.mem = mem
	base := uintptr(unsafe.Pointer(&mem[0]))
	copy(mem[st.base:], st.data)
	copy(mem[p.base:], p.data)
	for _, prog := range []*rawProg{st, p} {
		for _, at := range prog.ptrs {
			o := int(prog.base) + at
			binary.LittleEndian.PutUint64(mem[o:], binary.LittleEndian.Uint64(mem[o:])+uint64(base))
		}
	}
	ops := unsafe.Slice((*rawOp)(unsafe.Pointer(&mem[opsOff])), len(pre)+len(st.ops)+len(cmd))
	place := func(dst []rawOp, src []rawOp, rels []uint8) {
		for i, o := range src {
			for j := range o.args {
				if rels[i]&(1<<j) != 0 {
					o.args[j] += base
				}
			}
			dst[i] = o
		}
	}
	place(ops, pre, p.rels[:r.npre])
	place(ops[len(pre):], st.ops, st.rels)
	place(ops[len(pre)+len(st.ops):], cmd, p.rels[r.npre:cloneOp])
	ops[len(pre)+r.st.chdirOp].args[0] = cwdArg.v + base
	a := (*rawArena)(unsafe.Pointer(&mem[0]))
	a.relayOff, a.nrelay = opsOff, uintptr(nrelay)
	a.opsOff, a.nops = opsOff+uintptr(nrelay)*opSize, uintptr(len(pre)-nrelay+len(st.ops))
	a.cmdOff, a.ncmd = cmdOff, uintptr(len(cmd))
	a.cmdStack = base + stacks + 3*rawStackSize - 64
	a.initStack = base + stacks + 2*rawStackSize - 64
	a.failOp = -1
	a.initPC, a.cmdPC = funcPC(&rawInitFn), funcPC(&rawCmdFn)
	// Root's init is cloned into its namespaces; a user's relay creates
	// them (after entering the user namespace) and clones the init.
	flags := nsCloneFlags(r.spec.netOff()) &^ syscall.CLONE_NEWUSER
	role, stack := uintptr(roleInit), stacks+rawStackSize
	if user {
		flags, role, stack = 0, roleRelay, stacks
	}
	var pid int
	var errno syscall.Errno
	if sys != nil && sys.UseCgroupFD {
		// clone3 puts the init straight into the run's cgroup.
		ca := (*[11]uint64)(unsafe.Pointer(&mem[stacks-88]))
		*ca = [11]uint64{}
		ca[0] = uint64(flags | syscall.CLONE_VM | unix.CLONE_INTO_CGROUP)
		ca[4] = uint64(syscall.SIGCHLD)
		ca[5] = uint64(base + stack)
		ca[6] = rawStackSize - 64
		ca[10] = uint64(sys.CgroupFD)
		pid, errno = rawFork(unix.SYS_CLONE3, base+stacks-88, 88, a, role)
	} else {
		pid, errno = rawFork(syscall.SYS_CLONE, flags|syscall.CLONE_VM|uintptr(syscall.SIGCHLD), base+stack+rawStackSize-64, a, role)
	}
	if errno != 0 {
		unix.Munmap(mem)
		r.mem = nil
		return 0, errno
	}
	r.started = true
	return pid, nil
}

// rlimits compiles setRlimits into the command's program.
func (r *rawRun) rlimits(p *rawProg) {
	s := &r.spec
	set := func(name string, res int, cur, max uint64) {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint64(b, cur)
		binary.LittleEndian.PutUint64(b[8:], max)
		p.op(StepRlimits, name, unix.SYS_PRLIMIT64, num(0), num(uintptr(res)), p.blob(b), num(0))
	}
	set("RLIMIT_CORE", unix.RLIMIT_CORE, 0, 0)
	if s.CPUSeconds > 0 {
		set("RLIMIT_CPU", unix.RLIMIT_CPU, uint64(s.CPUSeconds), uint64(s.CPUSeconds)+1)
	}
	if s.FileSizeBytes > 0 {
		set("RLIMIT_FSIZE", unix.RLIMIT_FSIZE, uint64(s.FileSizeBytes), uint64(s.FileSizeBytes))
	}
	if s.OpenFiles > 0 {
		set("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, uint64(s.OpenFiles), uint64(s.OpenFiles))
	}
	if r.nproc && s.Processes > 0 {
		set("RLIMIT_NPROC", unix.RLIMIT_NPROC, uint64(s.Processes), uint64(s.Processes))
	}
	if s.MemoryBytes > 0 && !r.memCg {
		set("RLIMIT_DATA", unix.RLIMIT_DATA, uint64(s.MemoryBytes), uint64(s.MemoryBytes))
	}
}

// desc names operation i of the init's program (then the command's).
func (r *rawRun) desc(i int) rawDesc {
	nst := len(r.st.prog.ops)
	switch {
	case uint32(i) == rawCloneInitFailed:
		return rawDesc{StepStart, "clone the namespace's init"}
	case i < 0:
	case i < r.npre:
		return r.run.descs[i]
	case i-r.npre == r.st.chdirOp:
		return rawDesc{StepDir, r.cwd + " is not visible under the " + r.st.label + " profile (it shows the workspace, the system directories and the paths it lists)"}
	case i < r.npre+nst:
		return r.st.prog.descs[i-r.npre]
	case i-nst < len(r.run.descs):
		return r.run.descs[i-nst]
	}
	return rawDesc{StepReadSpec, "an unknown step"}
}

func (r *rawRun) read() ([4]uint32, error) {
	var b [16]byte
	var rec [4]uint32
	if _, err := io.ReadFull(r.status, b[:]); err != nil {
		return rec, err
	}
	for i := range rec {
		rec[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return rec, nil
}

// startedFn waits for the init to say that the command started, or which
// step failed.
func (r *rawRun) startedFn(int) error {
	rec, err := r.read()
	switch {
	case err != nil:
		return &SetupError{Step: StepStart, Msg: "the sandbox's init ended during its setup (it was killed, or the host's limits stopped it)"}
	case rec[0] == rawRecStarted:
		return nil
	case rec[0] == rawRecFailed:
		d := r.desc(int(rec[1]))
		errno := syscall.Errno(rec[2])
		msg := errno.Error()
		if d.what != "" {
			msg = d.what + ": " + msg
		}
		return &SetupError{Step: d.step, Msg: msg, Errno: int(errno)}
	}
	return &SetupError{Step: StepStart, Msg: "the sandbox's init sent an unknown status"}
}

// exited returns the command's own status, which the init reported.
func (r *rawRun) exited(code, signal int) (int, int) {
	rec, err := r.read()
	if err != nil || rec[0] != rawRecExited {
		return code, signal
	}
	if rec[1] == ^uint32(0) {
		return -1, int(rec[2])
	}
	return int(rec[1]), 0
}

// done frees the arena (the init, which ran on it, has been reaped), and
// removes the cgroups.
func (r *rawRun) done() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
	r.status.Close()
	r.remove()
}

// rawTestEdit, when set (by tests), changes each run's own operations.
var rawTestEdit func(p *rawProg)

var errRawUnavailable = errors.New("the in-process launcher is not available here")
