//go:build linux

package terminal

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPythonREPLOnTerminal(t *testing.T) {
	before := ptyFDs(t)
	s := start(t, Spec{Command: "python3 -i -q", TTY: true})
	waitFor(t, s, ">>>")
	if _, err := s.Write([]byte("print(6*7)\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, "42\n>>> ") // Ctrl-D typed before readline is back would be read as a NUL
	if _, err := s.Write([]byte("\x04")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Ended():
	case <-time.After(20 * time.Second):
		t.Fatal("python did not exit on Ctrl-D")
	}
	if r := s.Result(); r.ExitCode != 0 {
		t.Errorf("exit code %d", r.ExitCode)
	}
	s.Close()
	if after := ptyFDs(t); after != before {
		t.Errorf("%d descriptors on a pseudo-terminal before, %d after", before, after)
	}
}

func TestTerminalIsControllingTerminal(t *testing.T) {
	s := start(t, Spec{Command: `test -t 0 && test -t 1 && echo tty=yes; echo term=$TERM; ps -o tty= -p $$ >/dev/null && echo ctty; read -p 'name? ' n; echo hi $n`, TTY: true})
	out := waitFor(t, s, "name? ")
	if !strings.Contains(Readable([]byte(out)), "tty=yes") || !strings.Contains(out, "term=xterm-256color") {
		t.Fatalf("not a terminal: %q", out)
	}
	s.Write([]byte("bob\n"))
	waitFor(t, s, "hi bob")
	<-s.Ended()
}

func TestCtrlCStopsForeground(t *testing.T) {
	s := start(t, Spec{Command: "echo ready; sleep 100", TTY: true})
	waitFor(t, s, "ready")
	s.Write([]byte("\x03"))
	select {
	case <-s.Ended():
	case <-time.After(20 * time.Second):
		t.Fatal("Ctrl-C did not stop sleep")
	}
	if r := s.Result(); r.Signal != 2 && r.ExitCode != 130 {
		t.Errorf("result %+v, want SIGINT", r)
	}
}

func TestPipeSessionStdinClosed(t *testing.T) {
	s := start(t, Spec{Command: "cat; echo eof"})
	select {
	case <-s.Ended():
	case <-time.After(10 * time.Second):
		t.Fatal("cat did not get EOF")
	}
	b, _ := s.Read(0)
	if string(b) != "eof\n" {
		t.Errorf("output %q", b)
	}
	if _, err := s.Write([]byte("x")); err != ErrNoStdin {
		t.Errorf("Write: %v, want ErrNoStdin", err)
	}
}

func TestPipeStdin(t *testing.T) {
	s := start(t, Spec{Command: "read x; echo got $x; echo pager=$PAGER color=$NO_COLOR", PipeStdin: true})
	s.Write([]byte("abc\n"))
	waitFor(t, s, "pager=cat color=1")
	<-s.Ended()
	if _, err := s.Write([]byte("x")); err != ErrEnded {
		t.Errorf("Write after end: %v", err)
	}
}

func TestCloseEndsWholeTree(t *testing.T) {
	before := ptyFDs(t)
	s := start(t, Spec{Command: "sleep 300 & setsid sleep 300 & trap '' TERM; echo ready; wait", TTY: true, Grace: 200 * time.Millisecond})
	waitFor(t, s, "ready")
	s.Close()
	if s.Result() == nil {
		t.Fatal("no result after Close")
	}
	if after := ptyFDs(t); after != before {
		t.Errorf("%d descriptors on a pseudo-terminal before, %d after", before, after)
	}
}

// TestOutputBoundedAndDropsCounted: 1 GiB through a session keeps the
// ring's worth and counts the rest as dropped. Under the race detector it
// writes 128 MiB (1 GiB took up to 38 s of its 60 s bound on a loaded
// machine); CI runs it at full size without the race detector as well.
func TestOutputBoundedAndDropsCounted(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1 GiB")
	}
	size := 1 << 30
	if raceEnabled {
		size = 128 << 20
	}
	s := start(t, Spec{Command: fmt.Sprintf("head -c %d /dev/zero", size), RingSize: DefaultRingSize})
	select {
	case <-s.Ended():
	case <-time.After(60 * time.Second):
		t.Fatalf("%d MiB did not finish", size>>20)
	}
	b, dropped := s.Read(0)
	if len(b) != DefaultRingSize || dropped != int64(size)-DefaultRingSize {
		t.Errorf("kept %d, dropped %d", len(b), dropped)
	}
}

func TestForegroundDetection(t *testing.T) {
	s := start(t, Spec{Command: "bash --norc --noprofile -i", TTY: true})
	s.Write([]byte("PS1='$ '\n"))
	waitFor(t, s, "$ ")
	fg := s.Foreground()
	if !fg.Shell {
		t.Fatalf("foreground %+v, want a shell", fg)
	}
	s.Write([]byte("python3 -q\n"))
	waitFor(t, s, ">>>")
	fg = s.Foreground()
	if fg.Shell || !strings.HasPrefix(fg.Name, "python") {
		t.Fatalf("foreground %+v, want python", fg)
	}
	s.Write([]byte("import getpass; x = getpass.getpass('pass' + 'word: ')\n"))
	waitFor(t, s, "password: ")
	if !s.EchoOff() {
		t.Error("echo is not reported off at a password prompt")
	}
	s.Write([]byte("secret\n"))
	waitFor(t, s, ">>>")
	if s.EchoOff() {
		t.Error("echo reported off at the python prompt")
	}
}
