package runner

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// plan is a validated Spec, ready to start.
type plan struct {
	path    string // resolved program
	argv    []string
	env     []string
	dir     string
	timeout time.Duration
	grace   time.Duration
	drain   time.Duration
	extra   []*os.File // descriptors 3, 4, ... (Wrap)
	attr    func(*syscall.SysProcAttr)
	start   func(dir string, files []uintptr, sys *syscall.SysProcAttr) (int, error) // Wrapped.Start
}

// defaultShell finds bash, or sh where bash is missing, once per process.
var defaultShell = sync.OnceValue(func() string {
	for _, name := range []string{"bash", "sh"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return "/bin/sh"
})

func prepare(spec *Spec) (*plan, error) {
	p := &plan{dir: spec.Dir, timeout: spec.Timeout, grace: spec.Grace, drain: spec.Drain}
	if p.grace == 0 {
		p.grace = DefaultGrace
	} else if p.grace < 0 {
		p.grace = 0
	}
	if p.drain <= 0 {
		p.drain = DefaultDrain
	}
	if p.timeout < 0 {
		return nil, &StartError{Kind: ErrInvalidSpec, Detail: "timeout must not be negative"}
	}
	hasCommand := strings.TrimSpace(spec.Command) != ""
	switch {
	case hasCommand && len(spec.Argv) > 0:
		return nil, &StartError{Kind: ErrInvalidSpec, Detail: "set either a shell command or an argv, not both"}
	case !hasCommand && len(spec.Argv) == 0:
		return nil, &StartError{Kind: ErrEmptyCommand, Detail: "give a shell command or an argv"}
	case len(spec.Argv) > 0 && spec.Argv[0] == "":
		return nil, &StartError{Kind: ErrInvalidSpec, Detail: "argv[0] is empty"}
	}
	for _, l := range []struct {
		name string
		err  error
	}{{"stdout", spec.Stdout.Validate()}, {"stderr", spec.Stderr.Validate()}, {"combined", spec.Combined.Validate()}} {
		if l.err != nil {
			return nil, &StartError{Kind: ErrInvalidSpec, Detail: l.name + " limit", Err: l.err}
		}
	}

	p.env = spec.Env
	if p.env == nil {
		p.env = SafeEnv()
	}
	for _, kv := range p.env {
		if !strings.Contains(kv, "=") || strings.HasPrefix(kv, "=") || strings.ContainsRune(kv, 0) {
			return nil, &StartError{Kind: ErrInvalidSpec, Detail: "environment entries must look like KEY=value without NUL bytes: " + quoteShort(kv)}
		}
	}

	if p.dir != "" {
		if strings.ContainsRune(p.dir, 0) {
			return nil, &StartError{Kind: ErrBadDir, Dir: p.dir, Detail: "contains a NUL byte"}
		}
		fi, err := os.Stat(p.dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, &StartError{Kind: ErrBadDir, Dir: p.dir, Detail: "it does not exist"}
		case err != nil:
			return nil, &StartError{Kind: ErrBadDir, Dir: p.dir, Err: err}
		case !fi.IsDir():
			return nil, &StartError{Kind: ErrBadDir, Dir: p.dir, Detail: "it is not a directory"}
		}
	}

	if hasCommand {
		if strings.ContainsRune(spec.Command, 0) {
			return nil, &StartError{Kind: ErrInvalidSpec, Detail: "the command contains a NUL byte"}
		}
		shell := spec.Shell
		if shell == "" {
			shell = defaultShell()
		}
		path, err := resolveShell(shell)
		if err != nil {
			return nil, err
		}
		p.path = path
		p.argv = []string{filepath.Base(shell), "-c", spec.Command}
		return p, nil
	}
	for _, a := range spec.Argv {
		if strings.ContainsRune(a, 0) {
			return nil, &StartError{Kind: ErrInvalidSpec, Program: spec.Argv[0], Detail: "an argument contains a NUL byte"}
		}
	}
	path, err := resolveProgram(spec.Argv[0], p.env, p.dir)
	if err != nil {
		return nil, err
	}
	p.path = path
	p.argv = append([]string(nil), spec.Argv...)
	return p, nil
}

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return `"` + strings.ReplaceAll(s, "\x00", `\0`) + `"`
}

// resolveShell finds a shell by name in the host's PATH, or checks a path.
func resolveShell(shell string) (string, error) {
	if strings.Contains(shell, "/") {
		return checkExecutable(shell, shell)
	}
	path, err := exec.LookPath(shell)
	if err != nil {
		return "", &StartError{Kind: ErrNotFound, Program: shell, Detail: "shell not found in PATH"}
	}
	return path, nil
}

// resolveProgram finds argv[0]: a path is taken relative to dir, a bare
// name is searched in the PATH of env.
func resolveProgram(prog string, env []string, dir string) (string, error) {
	if strings.Contains(prog, "/") {
		path := prog
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		return path, nil // checked only if starting it fails
	}
	pathList, ok := lookupEnv(env, "PATH")
	if !ok {
		pathList = DefaultPath
	}
	var notExec error
	for _, d := range filepath.SplitList(pathList) {
		if d == "" || !filepath.IsAbs(d) {
			continue // relative PATH entries would depend on the working directory
		}
		path, err := checkExecutable(prog, filepath.Join(d, prog))
		if err == nil {
			return path, nil
		}
		if errors.Is(err, ErrNotExecutable) && notExec == nil {
			notExec = err
		}
	}
	if notExec != nil {
		return "", notExec
	}
	return "", &StartError{Kind: ErrNotFound, Program: prog, Detail: "not found in PATH " + pathList}
}

// checkExecutable reports whether path is a regular file with an execute
// bit. prog is the name to use in errors.
func checkExecutable(prog, path string) (string, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", &StartError{Kind: ErrNotFound, Program: prog}
	case errors.Is(err, fs.ErrPermission):
		return "", &StartError{Kind: ErrPermission, Program: prog, Err: err}
	case err != nil:
		return "", &StartError{Kind: ErrNotFound, Program: prog, Err: err}
	case fi.IsDir():
		return "", &StartError{Kind: ErrNotExecutable, Program: prog, Detail: "it is a directory"}
	case !fi.Mode().IsRegular():
		return "", &StartError{Kind: ErrNotExecutable, Program: prog, Detail: "it is not a regular file"}
	case fi.Mode().Perm()&0o111 == 0:
		return "", &StartError{Kind: ErrNotExecutable, Program: prog, Detail: "it has no execute permission"}
	}
	return path, nil
}

// programName names the program of a spec for errors.
func (s *Spec) programName() string {
	if len(s.Argv) > 0 {
		return s.Argv[0]
	}
	return s.Shell
}
