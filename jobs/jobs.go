// Package jobs runs commands in the background: each job's output goes to a
// file in a private state directory, and a small detached supervisor
// process (this program re-executed in a hidden mode) watches it, appends a
// completion line when it ends, and ends it when its lifetime is over. The
// supervisor lives in its own session, so a job outlives the call, and the
// process, that started it.
//
// A program that starts jobs must call Main first thing in main (and in
// TestMain), so that its re-executed copy becomes the supervisor.
package jobs

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentexec/agentexec/sandbox"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultLifetime is how long a job may run before its supervisor ends it
// (seed 001's background mode).
const DefaultLifetime = 24 * time.Hour

// Spec describes a job.
type Spec struct {
	// Command is run as Shell -c Command; Shell empty means bash (sh where
	// bash is missing). Argv, when set instead, is run without a shell.
	Command string
	Shell   string
	Argv    []string
	// Dir is the working directory; Env the exact environment (nil means
	// the runner's safe environment).
	Dir string
	Env []string
	// Lifetime ends the job (SIGTERM, Grace, SIGKILL to its tree) after
	// this long; zero means DefaultLifetime.
	Lifetime time.Duration
	// Grace is the time between SIGTERM and SIGKILL; zero means the
	// runner's default.
	Grace time.Duration
	// MaxOutputBytes caps the output file: past it, the oldest output is
	// dropped (the file says how much) and the newest kept. Zero means
	// DefaultMaxOutput.
	MaxOutputBytes int64
	// Sandbox confines the job (nil: not at all).
	Sandbox *sandbox.Spec
	// Tool and Conversation record who started the job.
	Tool         string
	Conversation string
}

// DefaultMaxOutput is the default cap of a job's output file.
const DefaultMaxOutput = 256 << 20

// describe returns the command line of a spec, for records and listings.
func (s *Spec) describe() string {
	if len(s.Argv) > 0 {
		return strings.Join(s.Argv, " ")
	}
	return s.Command
}

// Job is a started job.
type Job struct {
	// ID names the job in its state directory.
	ID string
	// Pid is the command's process id, which is also its process group
	// id: kill -9 -Pid ends it.
	Pid int
	// Dir is the job's private directory; OutputFile holds its stdout and
	// stderr, then its completion line.
	Dir        string
	OutputFile string
}

// Info is a job's record (job.json in its directory), written by the
// process that watches the job (its supervisor, or the host for jobs
// detached from a foreground call) when the job starts, when output is
// dropped, and when it ends.
type Info struct {
	ID           string    `json:"id"`
	Pid          int       `json:"pid"`
	OwnerPid     int       `json:"owner_pid"`
	Command      string    `json:"command"`
	Dir          string    `json:"cwd"`
	Tool         string    `json:"tool,omitempty"`
	Conversation string    `json:"conversation,omitempty"`
	Started      time.Time `json:"started"`
	Lifetime     Duration  `json:"lifetime"`
	// State is running, exited, signaled, timed out or cancelled; List
	// reports "lost" for a running job whose owner is gone, and a server
	// that finds such a job ends it and records "orphaned".
	State    string    `json:"state"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Signal   int       `json:"signal,omitempty"`
	Ended    time.Time `json:"ended,omitzero"`
	// Dropped is how many bytes of the oldest output were dropped to keep
	// the file under its cap; HeaderLen is the length of the line at the
	// start of the file that says so.
	Dropped   int64 `json:"dropped,omitempty"`
	HeaderLen int64 `json:"header_len,omitempty"`
	// PidStart and OwnerStart are when the job's process and its owner
	// started (clock ticks after boot, from /proc/PID/stat): a pid alone
	// may since name another process; the pair names one.
	PidStart   uint64 `json:"pid_start,omitempty"`
	OwnerStart uint64 `json:"owner_start,omitempty"`
	// Dir of the job, filled in by List and Get (not stored).
	JobDir string `json:"-"`
	// Note says, for people and models, what went wrong with the job's
	// directory or record when Get had to rely on memory (not stored).
	Note string `json:"-"`
}

// Running reports whether the job has not ended.
func (i *Info) Running() bool { return i.State == "running" }

// Describe returns the state for people: "running", "exited 0",
// "killed by SIGTERM", "timed out", "stopped", "lost".
func (i *Info) Describe() string {
	switch i.State {
	case "exited":
		if i.ExitCode != nil {
			return fmt.Sprintf("exited %d", *i.ExitCode)
		}
	case "signaled":
		return "killed by " + signalName(i.Signal)
	case "cancelled":
		return "stopped"
	case "orphaned":
		return "stopped (the agentexec process that owned it had died)"
	}
	return i.State
}

// Duration is a time.Duration written as a Go duration string.
type Duration time.Duration

// MarshalJSON writes d as "24h0m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// DefaultStateDir is where jobs live unless a Manager says otherwise:
// $XDG_RUNTIME_DIR/agentexec when that is set, else agentexec-<uid> in the
// system's temporary directory.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "agentexec")
	}
	return filepath.Join(os.TempDir(), "agentexec-"+strconv.Itoa(os.Getuid()))
}

// PrivateDir creates dir (and its parents) as privateDir does, for other
// private state of agentexec (a server's token file): a directory of this
// user, mode 0700, not a link; anything else is refused with the reason.
func PrivateDir(dir string) error { return privateDir(dir) }

// privateDir creates dir (and its parents) and checks that it is a
// directory owned by this user that nobody else can enter: a directory in
// a shared temporary directory could have been planted by someone else.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("jobs: cannot create the state directory %s: %w (set jobs.state_dir or --state-dir to a directory of yours)", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("jobs: state directory: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("jobs: refusing the state directory %s: it is a symbolic link, which someone else may have planted; remove it, or set jobs.state_dir to a private directory", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("jobs: refusing the state directory %s: it is not a directory; remove it, or set jobs.state_dir", dir)
	}
	if err := checkOwner(fi); err != nil {
		return fmt.Errorf("jobs: refusing the state directory %s: %w, who could plant job records in it; remove it (as that user or root), or set jobs.state_dir to a private directory", dir, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("jobs: state directory %s is open to other users and cannot be made private: %w", dir, err)
		}
	}
	return nil
}

func newID() string {
	var b [6]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// writeInfo writes info to dir/job.json atomically.
func writeInfo(dir string, info *Info) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".job.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "job.json"))
}

// ReadInfo reads the record of the job in dir.
func ReadInfo(dir string) (*Info, error) {
	b, err := os.ReadFile(filepath.Join(dir, "job.json"))
	if err != nil {
		return nil, err
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("jobs: %s/job.json: %w", dir, err)
	}
	return &info, nil
}

// ErrNoSupervisor means the program did not become a supervisor when
// re-executed: it does not call Main first thing in main.
var ErrNoSupervisor = errors.New("jobs: the supervisor did not start")
