package terminal

import "path/filepath"

// Foreground is the program that reads a session's input: on a terminal,
// a process of the terminal's foreground process group that has no child
// in that group (so `bash -c 'python3; echo'` reads as python3); on pipes,
// such a process of the session. When there are several, a shell among
// them is chosen (its input is then checked as commands), else the newest.
type Foreground struct {
	// Pid is the process's id; zero when it could not be found.
	Pid int
	// Name is its executable's base name (its command name when the
	// executable cannot be read).
	Name string
	// Shell reports whether it is a shell (Shells).
	Shell bool
}

// Known reports whether the foreground process was found.
func (f Foreground) Known() bool { return f.Pid != 0 }

// Shells are the programs whose input lines are shell commands.
var Shells = []string{"bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "fish", "tcsh", "csh", "busybox", "rbash", "yash", "posh"}

// IsShell reports whether name (a path or base name) is one of Shells.
func IsShell(name string) bool {
	b := filepath.Base(name)
	for _, s := range Shells {
		if b == s {
			return true
		}
	}
	return false
}

// Foreground returns the program reading the session's input now; the
// zero Foreground when it cannot be told (the session ended, or the
// platform does not say).
func (s *Session) Foreground() Foreground {
	select {
	case <-s.proc.Done():
		return Foreground{}
	default:
	}
	return foreground(s.proc.Pid, s.tty)
}
