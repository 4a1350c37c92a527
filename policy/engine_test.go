package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/safety"
)

func TestEngineProfiles(t *testing.T) {
	cases := []struct {
		profile Profile
		cmd     string
		verdict Verdict
		rule    string
	}{
		{Guarded, "ls -la", Allow, ""},
		{Guarded, "git push --force", Deny, safety.RuleGitPushForce},
		{Guarded, "rm -rf /", Deny, safety.RuleRmCritical},
		{Guarded, "$cmd", Ask, RuleDynamicCommand},
		{Guarded, `bash -c "$x"`, Ask, RuleNestedScript},
		{Guarded, `echo "unterminated`, Deny, RuleParseError},
		{Guarded, `make build && ./deploy.sh`, Allow, ""},
		{Open, "git push --force", Allow, ""},
		{Open, "$cmd", Allow, ""},
		{Open, `echo "unterminated`, Allow, ""},
		{Strict, "ls -la", Allow, ""},
		{Strict, "cat a | grep b | wc -l", Allow, ""},
		{Strict, "git status && git log -n 3", Allow, ""},
		{Strict, "git commit -m x", Ask, RuleStrict},
		{Strict, "sed -i s/a/b/ f", Ask, RuleStrict},
		{Strict, "sed s/a/b/ f", Allow, ""},
		{Strict, "find . -name x -delete", Ask, RuleStrict},
		{Strict, "find . -name x", Allow, ""},
		{Strict, "sudo cat /etc/shadow", Ask, RuleStrict},
		{Strict, "echo hi > out.txt", Ask, RuleStrict},
		{Strict, "echo hi > /dev/null", Allow, ""},
		{Strict, "make", Ask, RuleStrict},
		{Strict, "rm -rf /", Deny, safety.RuleRmCritical},
	}
	for _, c := range cases {
		e, err := NewEngine(c.profile, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := e.Check(Request{Tool: "bash", Command: c.cmd})
		if d.Verdict != c.verdict || d.Rule != c.rule {
			t.Errorf("%s %q: %v %q (%s), want %v %q", c.profile, c.cmd, d.Verdict, d.Rule, d.Reason, c.verdict, c.rule)
		}
	}
}

func TestEngineSeedTexts(t *testing.T) {
	e, _ := NewEngine(Guarded, nil)
	if d := e.Check(Request{Command: `echo "x`}); d.Message() != "Failed to parse script" {
		t.Errorf("parse: %q", d.Message())
	}
	if d := e.Check(Request{Command: "git add ."}); !strings.HasPrefix(d.Message(), "permission denied: blind git add commands") {
		t.Errorf("git add: %q", d.Message())
	}
}

func TestEngineRules(t *testing.T) {
	rules := []Rule{
		{ID: "no-publish", Action: Deny, Prefix: "npm publish", Reason: "publishing is for people", Alternative: "Ask the user to publish",
			MustMatch: []string{"npm publish", "npm publish --access public", "cd x && npm publish"}, MustNotMatch: []string{"npm test", "echo npm publish"}},
		{ID: "ask-docker", Action: Ask, Executables: []string{"docker", "/usr/local/bin/podman"}},
		{ID: "allow-force-push", Action: Allow, Builtin: safety.RuleGitPushForce},
		{ID: "ask-dynamic", Action: Deny, Builtin: RuleDynamicCommand},
		{ID: "no-etc", Action: Deny, CwdRoots: []string{"/etc"}},
		{ID: "aws-keys", Action: Ask, EnvKeys: []string{"AWS_SECRET_ACCESS_KEY"}},
		{ID: "allow-make", Action: Allow, Executables: []string{"make"}},
		{ID: "only-shell", Action: Deny, Executables: []string{"curl"}, Tools: []string{"shell.exec"}},
	}
	e, err := NewEngine(Guarded, rules)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		req     Request
		verdict Verdict
		rule    string
	}{
		{Request{Tool: "bash", Command: "npm publish"}, Deny, "no-publish"},
		{Request{Tool: "bash", Command: "sudo npm publish --tag x"}, Deny, "no-publish"},
		{Request{Tool: "bash", Command: "npm install"}, Allow, ""},
		{Request{Tool: "bash", Command: "docker run x"}, Ask, "ask-docker"},
		{Request{Tool: "shell.exec", Executable: "/usr/local/bin/podman", Args: []string{"ps"}}, Ask, "ask-docker"},
		{Request{Tool: "bash", Command: "git push -f"}, Allow, "allow-force-push"},
		{Request{Tool: "bash", Command: "$x"}, Deny, "ask-dynamic"},
		{Request{Tool: "bash", Command: "ls", Cwd: "/etc/ssl"}, Deny, "no-etc"},
		{Request{Tool: "bash", Command: "ls", Cwd: "/etcetera"}, Allow, ""},
		{Request{Tool: "shell.exec", Executable: "aws", EnvKeys: []string{"AWS_SECRET_ACCESS_KEY"}}, Ask, "aws-keys"},
		{Request{Tool: "bash", Command: "AWS_SECRET_ACCESS_KEY=x aws s3 ls"}, Ask, "aws-keys"},
		{Request{Tool: "shell.exec", Executable: "ls", EnvKeys: []string{"LD_PRELOAD"}}, Deny, safety.RuleLoaderEnv},
		{Request{Tool: "bash", Command: "make && rm -rf /"}, Deny, safety.RuleRmCritical},
		{Request{Tool: "bash", Command: "curl x"}, Allow, ""},
		{Request{Tool: "shell.exec", Executable: "curl"}, Deny, "only-shell"},
		{Request{Tool: "shell.exec", Executable: "bash", Args: []string{"-c", "npm publish"}}, Deny, "no-publish"},
	}
	for _, c := range cases {
		d := e.Check(c.req)
		if d.Verdict != c.verdict || d.Rule != c.rule {
			t.Errorf("%+v: %v %q (%s), want %v %q", c.req, d.Verdict, d.Rule, d.Reason, c.verdict, c.rule)
		}
		if d.Verdict != Allow && d.Reason == "" {
			t.Errorf("%+v: no reason", c.req)
		}
	}
	if d := e.Check(Request{Command: "npm publish"}); d.Message() != "permission denied: publishing is for people. Ask the user to publish" {
		t.Errorf("message %q", d.Message())
	}
}

func TestEngineRuleErrors(t *testing.T) {
	cases := []struct {
		rules []Rule
		want  string
	}{
		{[]Rule{{Action: Deny, Executables: []string{"rm"}}}, "rules[0]: id: every rule needs an id"},
		{[]Rule{{ID: "a", Executables: []string{"x"}}, {ID: "a", Executables: []string{"y"}}}, "rules[1] (a): id: another rule has this id"},
		{[]Rule{{ID: "a"}}, "rules[0] (a): a rule needs at least one of"},
		{[]Rule{{ID: "a", Executables: []string{"bin/rm"}}}, `rules[0] (a): executables: "bin/rm": use a program name`},
		{[]Rule{{ID: "a", Builtin: "nope"}}, `rules[0] (a): builtin: "nope" is not a built-in rule; the built-in rules are git-add-blind,`},
		{[]Rule{{ID: "a", CwdRoots: []string{"rel"}}}, `rules[0] (a): cwd_roots: "rel": use an absolute path`},
		{[]Rule{{ID: "a", Prefix: "npm publish", MustMatch: []string{"npm test"}}}, `rules[0] (a): must_match: the example "npm test" does not match this rule`},
		{[]Rule{{ID: "a", Prefix: "npm", MustNotMatch: []string{"npm test"}}}, `rules[0] (a): must_not_match: the example "npm test" matches this rule`},
		{[]Rule{{ID: "a", Builtin: "git-push-force", MustMatch: []string{"git push --force-with-lease"}}}, "rules[0] (a): must_match"},
	}
	for _, c := range cases {
		_, err := NewEngine(Guarded, c.rules)
		var re *RuleError
		if !errors.As(err, &re) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if _, err := NewEngine("paranoid", nil); err == nil || !strings.Contains(err.Error(), "use open, guarded or strict") {
		t.Errorf("profile: %v", err)
	}
}

// manyRules returns n rules of every form.
func manyRules(n int) []Rule {
	var rules []Rule
	for i := range n {
		switch i % 4 {
		case 0:
			rules = append(rules, Rule{ID: fmt.Sprint("exe", i), Action: Ask, Executables: []string{fmt.Sprint("tool", i)}})
		case 1:
			rules = append(rules, Rule{ID: fmt.Sprint("prefix", i), Action: Deny, Prefix: fmt.Sprintf("git sub%d", i)})
		case 2:
			rules = append(rules, Rule{ID: fmt.Sprint("path", i), Action: Allow, Executables: []string{fmt.Sprintf("/opt/bin/t%d", i)}})
		case 3:
			rules = append(rules, Rule{ID: fmt.Sprint("cwd", i), Action: Ask, CwdRoots: []string{fmt.Sprintf("/srv/p%d", i)}})
		}
	}
	return rules
}

// BenchmarkDecide: a decision with 200 configured rules, beside the
// checker's own cost on the same command.
func BenchmarkDecide(b *testing.B) {
	const cmd = `cd /work/project && git status --short && go test ./... -run TestFoo -count=1 2>&1 | tail -n 50; git diff --stat HEAD~1 -- src/ tests/ && make lint`
	e, err := NewEngine(Guarded, manyRules(200))
	if err != nil {
		b.Fatal(err)
	}
	req := Request{Tool: "bash", Command: cmd, Cwd: "/work/project"}
	rep := safety.Analyze(cmd, nil)
	b.Run("baseline=safety.Analyze", func(b *testing.B) {
		for b.Loop() {
			safety.Analyze(cmd, nil)
		}
	})
	b.Run("Decide-200-rules", func(b *testing.B) {
		for b.Loop() {
			e.Decide(req, rep)
		}
	})
}
