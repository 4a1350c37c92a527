//go:build linux

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/tool"
	"github.com/spf13/cobra"
)

// writeConfig writes a configuration file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agentexec.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// noTTY makes the test's approval prompts find no terminal.
func noTTY(t *testing.T) {
	saved := openTTY
	openTTY = func() (*os.File, error) { return nil, os.ErrNotExist }
	t.Cleanup(func() { openTTY = saved })
}

// TestRunAppliesPolicy: run puts the command to the configuration's
// policy; a refusal runs nothing, exits 123 and says why, what to do
// instead and which rule would allow it; --policy off opts out.
func TestRunAppliesPolicy(t *testing.T) {
	noTTY(t)
	ws := t.TempDir()
	marker := filepath.Join(ws, "ran")
	strict := writeConfig(t, "profile = \"strict\"\n")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"deny", []string{"run", "--cwd", ws, "git add -A; touch " + marker}, ExitRefused,
			[]string{"refused by policy rule git-add-blind", "nothing ran", "specify files explicitly", `builtin = "git-add-blind"`, "--policy off"}},
		{"ask without a terminal", []string{"run", "--cwd", ws, "$CMD x; touch " + marker}, ExitRefused,
			[]string{"policy rule dynamic-command asks", "no terminal to ask on", `builtin = "dynamic-command"`}},
		{"strict asks", []string{"run", "--config", strict, "--cwd", ws, "make test; touch " + marker}, ExitRefused,
			[]string{"strict-allowlist", `prefix = "make test"`, `tools = ["run"]`}},
		{"argv is checked too", []string{"run", "--cwd", ws, "--argv", "--", "git", "add", "."}, ExitRefused,
			[]string{"git-add-blind"}},
		{"policy off", []string{"run", "--policy", "off", "--cwd", ws, "true || git add -A; echo ran"}, 0, nil},
		{"bad --policy", []string{"run", "--policy", "maybe", "true"}, ExitFailed, []string{`--policy "maybe": use on or off`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", code, c.code, stderr)
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the refused command ran")
				os.Remove(marker)
			}
		})
	}
}

// TestRunAsksAtTheTerminal: when the policy asks, the person's answer
// decides: yes runs the command, no refuses it (exit 123).
func TestRunAsksAtTheTerminal(t *testing.T) {
	ws := t.TempDir()
	saved := runApprover
	t.Cleanup(func() { runApprover = saved })
	for answer, want := range map[string]int{"y\n": 0, "n\n": ExitRefused, "\n": ExitRefused} {
		var prompt strings.Builder
		runApprover = func() (tool.Approver, func(), error) {
			return &promptApprover{in: strings.NewReader(answer), out: &prompt, quiet: true}, func() {}, nil
		}
		code, stdout, stderr := runCLI(t, "run", "--cwd", ws, "X=$(printf echo); $X approved")
		if code != want || !strings.Contains(prompt.String(), "you asked to run:\n    X=$(printf echo); $X approved") {
			t.Errorf("%q: %d %q %q; prompt %q", answer, code, stdout, stderr, prompt.String())
		}
		if want == 0 && stdout != "approved\n" {
			t.Errorf("%q: stdout %q", answer, stdout)
		}
		if want != 0 && (stdout != "" || !strings.Contains(stderr, "declined at the terminal") || !strings.Contains(stderr, `builtin = "dynamic-command"`)) {
			t.Errorf("%q: %q %q", answer, stdout, stderr)
		}
	}
}

// TestRunRuleToPaste: the rule a refusal prints, pasted into the
// configuration, lets the command run.
func TestRunRuleToPaste(t *testing.T) {
	noTTY(t)
	ws := t.TempDir()
	for _, c := range []struct{ config, command string }{
		{"", "git add -A || true"},
		{"", "$NOPE; echo dynamic"},
		{"profile = \"strict\"\n", "make --version >/dev/null 2>&1; echo strict"},
	} {
		cfg := writeConfig(t, c.config)
		code, _, stderr := runCLI(t, "run", "--config", cfg, "--cwd", ws, c.command)
		if code != ExitRefused {
			t.Fatalf("%q: exit %d %q", c.command, code, stderr)
		}
		_, rest, ok := strings.Cut(stderr, "add to the configuration (agentexec config show names the file):\n\n")
		if !ok {
			t.Fatalf("%q: no rule in %q", c.command, stderr)
		}
		rule, _, _ := strings.Cut(rest, "\n\n")
		var lines []string
		for _, l := range strings.Split(rule, "\n") {
			lines = append(lines, strings.TrimPrefix(l, "    "))
		}
		cfg = writeConfig(t, c.config+"\n"+strings.Join(lines, "\n")+"\n")
		if code, _, stderr := runCLI(t, "run", "--config", cfg, "--cwd", ws, c.command); code != 0 {
			t.Errorf("%q with the pasted rule:\n%s\nexit %d %q", c.command, strings.Join(lines, "\n"), code, stderr)
		}
	}
}

// TestRunAppliesSandboxProfile: run confines the command with the
// configuration's [sandbox] profile; --sandbox off runs it unconfined.
func TestRunAppliesSandboxProfile(t *testing.T) {
	ws := t.TempDir()
	readOnly := writeConfig(t, "[sandbox]\nprofile = \"read-only\"\n")
	code, stdout, stderr := runCLI(t, "run", "--config", readOnly, "--cwd", ws, "echo x > f 2>/dev/null && echo wrote || echo refused")
	if code != 0 || stdout != "refused\n" {
		t.Errorf("read-only profile from the configuration: %d %q %q", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "run", "--config", readOnly, "--sandbox", "off", "--cwd", ws, "echo x > f 2>/dev/null && echo wrote || echo refused")
	if code != 0 || stdout != "wrote\n" {
		t.Errorf("--sandbox off: %d %q %q", code, stdout, stderr)
	}
	// The default profile, workspace-write: the workspace is writable,
	// the rest of the system is not.
	code, stdout, stderr = runCLI(t, "run", "--cwd", ws, "echo x > g && echo wrote; echo y > /etc/agentexec-test 2>/dev/null || echo refused")
	if code != 0 || stdout != "wrote\nrefused\n" {
		t.Errorf("default profile: %d %q %q", code, stdout, stderr)
	}
	// The configuration's tools.cgroup applies too, named as such.
	badCgroup := writeConfig(t, "[tools]\ncgroup = \"/tmp\"\n")
	if code, _, stderr := runCLI(t, "run", "--config", badCgroup, "true"); code != ExitFailed || !strings.Contains(stderr, "tools.cgroup in the configuration") {
		t.Errorf("tools.cgroup: %d %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "run", "--config", badCgroup, "--cgroup", "off", "true"); code != 0 {
		t.Errorf("--cgroup off over tools.cgroup: %d %q", code, stderr)
	}
	// The configuration's [env] reaches the command, as it reaches a tool call.
	withEnv := writeConfig(t, "[env]\nset = { GREETING = \"hi\" }\n")
	if code, stdout, _ := runCLI(t, "run", "--config", withEnv, "echo $GREETING"); code != 0 || stdout != "hi\n" {
		t.Errorf("[env] set: %d %q", code, stdout)
	}
}

// TestConfigShowEveryKey: config show prints every key of the
// configuration (config.Entries, walked from the struct) with its source:
// default, file:line or flag.
func TestConfigShowEveryKey(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	cfg := writeConfig(t, "[sandbox]\nprofile = \"strict\"\n\n[tools]\ndetach_after = \"10s\"\njob_tools = false\n\n[jobs]\nmax_live = 3\nmax_output = \"1MiB\"\n")
	code, stdout, stderr := runCLI(t, "config", "show", "--config", cfg, "--tools", "bash,exec", "--grant-fs", "r:/usr")
	if code != 0 {
		t.Fatalf("exit %d %q", code, stderr)
	}
	c, err := config.Load(config.Options{File: cfg})
	if err != nil {
		t.Fatal(err)
	}
	table := ""
	for _, e := range c.Entries() {
		if e.Table != table {
			table = e.Table
			if !strings.Contains(stdout, "\n["+table+"]\n") {
				t.Errorf("no [%s] header", table)
			}
		}
		name := e.Key[strings.LastIndexByte(e.Key, '.')+1:]
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` = .* # `).MatchString(stdout) {
			t.Errorf("%s is not shown", e.Key)
		}
	}
	for _, want := range []string{
		`profile = "strict"`, "# " + cfg + ":2",
		`detach_after = "10s"`, "# " + cfg + ":5",
		"job_tools = false", `max_live = 3`, `max_output = "1048576"`,
		`enabled = ["bash","exec"]`, "# flag --tools", `fs = ["r:/usr"]`, "# flag --grant-fs",
		"(named by --config)",
		"empty: " + filepath.Join(state, "agentexec", "audit.jsonl") + " (from env $XDG_STATE_HOME)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, stdout)
		}
	}
	// What config show prints is a configuration that loads.
	var body []string
	for _, l := range strings.Split(stdout, "\n") {
		if !strings.HasPrefix(l, "#") {
			body = append(body, l)
		}
	}
	if _, err := config.Parse("shown.toml", strings.Join(body, "\n")); err != nil {
		t.Errorf("the output does not load back: %v", err)
	}
}

// TestFlagErrorsBlameTheFlag: with a configuration file present, a bad
// flag value names the flag, not the file.
func TestFlagErrorsBlameTheFlag(t *testing.T) {
	callEnv(t)
	cfg := writeConfig(t, "profile = \"guarded\"\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"call", "--config", cfg, "--sandbox", "nope", "bash", "{}"}, `--sandbox: "nope" is not a sandbox profile`},
		{[]string{"call", "--config", cfg, "--tools", "zsh", "bash", "{}"}, `--tools: "zsh" is not a contract`},
		{[]string{"run", "--config", cfg, "--sandbox", "nope", "true"}, `--sandbox: "nope" is not a sandbox profile`},
		{[]string{"mcp", "--config", cfg, "--grant-fs", "x", "--audit-log", "off"}, `--grant-fs: "x": use MODE:PATH`},
		{[]string{"config", "show", "--config", cfg, "--sandbox", "nope"}, `--sandbox: "nope"`},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != ExitFailed || !strings.Contains(stderr, c.want) || strings.Contains(stderr, cfg) || strings.Contains(stderr, "agentexec.toml") {
			t.Errorf("%q: %d %q; want 125 and %q without the file", c.args, code, stderr, c.want)
		}
	}
}

// TestCallUsageMistakes: mistakes in using call itself exit 125 and print
// nothing on stdout (which carries only what the model would see).
func TestCallUsageMistakes(t *testing.T) {
	callEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"call"}, "give a tool name"},
		{[]string{"call", "a", "b", "c"}, "give a tool name"},
		{[]string{"call", "zsh", "{}"}, `no tool is registered as "zsh"; the registered tools are bash`},
		{[]string{"call", "exec", "{}"}, "the exec tool is not enabled; enable it with --tools exec"},
		{[]string{"call", "--bogus", "bash", "{}"}, "unknown flag: --bogus"},
		{[]string{"call", "--profile", "lax", "bash", "{}"}, `--profile "lax"`},
	} {
		code, stdout, stderr := runCLI(t, c.args...)
		if code != ExitFailed || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: %d %q %q; want 125 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// TestExecGrantSaysHow: a missing Exec grant names the flag and the key.
func TestExecGrantSaysHow(t *testing.T) {
	callEnv(t)
	code, stdout, _ := runCLI(t, "call", "--tools", "Exec", "Exec", `{"argv": ["/usr/bin/id"]}`)
	if code != ExitToolError || !strings.Contains(stdout, "--grant-tool Exec") || !strings.Contains(stdout, `grants.tools = [\"Exec\"]`) {
		t.Errorf("%d %q", code, stdout)
	}
	code, stdout, _ = runCLI(t, "call", "--tools", "Exec", "--grant-tool", "Exec", "Exec", `{"argv": ["/usr/bin/id"]}`)
	if code != ExitToolError || !strings.Contains(stdout, "--grant-fs r:PATH") || !strings.Contains(stdout, "grants.fs") {
		t.Errorf("fs grant: %d %q", code, stdout)
	}
}

// TestDetachedCallRecordsSandbox: with detach_after, a call that detaches
// and one that ends before both record the sandbox (call --json and the
// audit event) and the detached one its job id.
func TestDetachedCallRecordsSandbox(t *testing.T) {
	dir := callEnv(t)
	log := filepath.Join(dir, "audit.jsonl")
	// A sandboxed start under the race detector can take a second or more
	// on a loaded machine: the quick command must not detach by accident.
	cfg := writeConfig(t, "[tools]\ndetach_after = \"5s\"\n[sandbox]\nprofile = \"workspace-write\"\n")
	type result struct {
		Run struct {
			Sandbox string `json:"sandbox"`
			JobID   string `json:"job_id"`
			Outcome string `json:"outcome"`
		} `json:"run"`
	}
	for _, c := range []struct {
		name, command, outcome string
		job                    bool
	}{
		{"ends before", "echo quick", "exited", false},
		{"detaches", "sleep 8; echo slow", "detached", true},
	} {
		code, stdout, stderr := runCLI(t, "call", "--config", cfg, "--audit-log", log, "--json", "bash", `{"command": "`+c.command+`"}`)
		var r result
		if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != 0 {
			t.Fatalf("%s: %d %v %q %q", c.name, code, err, stdout, stderr)
		}
		if r.Run.Sandbox != "workspace-write" || r.Run.Outcome != c.outcome || (r.Run.JobID != "") != c.job {
			t.Errorf("%s: run %+v", c.name, r.Run)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	finished := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var ev struct {
			Event, Sandbox string
		}
		json.Unmarshal(sc.Bytes(), &ev)
		if ev.Event == "tool.call.finished" {
			finished++
			if ev.Sandbox != "workspace-write" {
				t.Errorf("audit event without the sandbox: %s", sc.Text())
			}
		}
	}
	if finished != 2 {
		t.Errorf("%d finished events in %s", finished, b)
	}
}

// TestBackgroundAnswerNamesTheJob: the CLI's background answer keeps the
// model's text on stdout and names the job on stderr and in --json.
func TestBackgroundAnswerNamesTheJob(t *testing.T) {
	dir := t.TempDir()
	token := proctest.Token(t)
	for _, asJSON := range []bool{false, true} {
		args := []string{"call", "--state-dir", filepath.Join(dir, "jobs"), "--audit-log", "off"}
		if asJSON {
			args = append(args, "--json")
		}
		argv, helper := proctest.HelperArgv(t, "cli", append(args, "bash", `{"command": "echo done", "mode": "background"}`)...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), helper, token, "GORACE=atexit_sleep_ms=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %s %s", err, out, stderr.Bytes())
		}
		var id string
		if asJSON {
			var r struct {
				Run struct {
					JobID   string `json:"job_id"`
					Sandbox string `json:"sandbox"`
				} `json:"run"`
			}
			json.Unmarshal(out, &r)
			id = r.Run.JobID
			if r.Run.Sandbox == "" {
				t.Errorf("--json: no sandbox in %s", out)
			}
		} else {
			if !strings.HasPrefix(string(out), "<pid>") {
				t.Errorf("stdout %q is not the model's answer", out)
			}
			if m := regexp.MustCompile(`running as job (\S+) \(pid \d+\); follow it with ` + "`agentexec jobs logs (\\S+) -f`").FindStringSubmatch(stderr.String()); m != nil && m[1] == m[2] {
				id = m[1]
			}
		}
		if id == "" || !strings.Contains(string(out), id) {
			t.Errorf("json=%v: no job id (%q) in %q / %q", asJSON, id, out, stderr.String())
		}
	}
	proctest.NoSurvivors(t, token)
}

// TestVersion: --version names the module and the revision, or says
// that the revision is unknown (CI builds with -buildvcs=false).
func TestVersion(t *testing.T) {
	code, stdout, _ := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(stdout, "agentexec "+Version+"\n") || !strings.Contains(stdout, "module: ") || !strings.Contains(stdout, "revision: ") {
		t.Errorf("%d %q", code, stdout)
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/agentexec/agentexec", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-11-23T10:00:00Z"}}}
	got := versionText(bi, true)
	for _, want := range []string{"module: github.com/agentexec/agentexec v1.2.3\n", "revision: 0123abcd (with uncommitted changes), committed 2026-11-23T10:00:00Z\n", "go1.26.0"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	bi.Settings = nil
	if got := versionText(bi, true); !strings.Contains(got, "revision: unknown (built without VCS information") {
		t.Errorf("no VCS: %q", got)
	}
	if got := versionText(nil, false); !strings.Contains(got, "no build information") {
		t.Errorf("no build info: %q", got)
	}
}

// TestNoDesignNumbers: nothing a user or a model reads names the designs
// by their seed numbers: help texts, tool descriptions and schemas, the
// starter configuration.
func TestNoDesignNumbers(t *testing.T) {
	seed := regexp.MustCompile(`(?i)\bseeds?\b|\b00[0-4]\b`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		var out bytes.Buffer
		c.SetOut(&out)
		c.SetErr(&out)
		c.Help()
		if m := seed.FindString(out.String()); m != "" {
			t.Errorf("%s --help says %q:\n%s", c.CommandPath(), m, out.String())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}))
	if m := seed.FindString(config.Default()); m != "" {
		t.Errorf("the starter configuration says %q", m)
	}
	callEnv(t)
	code, stdout, _ := runCLI(t, "tools", "--json", "--tools", strings.Join(config.Contracts, ","))
	if code != 0 || !strings.Contains(stdout, `"shell.exec"`) {
		t.Fatalf("tools: %d %q", code, stdout)
	}
	if m := seed.FindString(stdout); m != "" {
		t.Errorf("the tool descriptions say %q", m)
	}
}

// TestCallAskPrintsRule: a call the policy asks about, with no one to
// ask, is refused with the configuration rule that would allow it.
func TestCallAskPrintsRule(t *testing.T) {
	noTTY(t)
	callEnv(t)
	code, stdout, _ := runCLI(t, "call", "bash", `{"command": "$TOOL --version"}`)
	if code != ExitToolError || !strings.Contains(stdout, "no one can be asked here") ||
		!strings.Contains(stdout, "[[rules]]\nid = \"allow-dynamic-command\"\naction = \"allow\"\nbuiltin = \"dynamic-command\"\n") {
		t.Errorf("%d %q", code, stdout)
	}
}
