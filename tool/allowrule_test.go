package tool_test

import (
	"strings"
	"testing"

	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
)

// TestAllowRule: the rule printed for a refusal or an ask is valid
// configuration, and with it the same request is allowed.
func TestAllowRule(t *testing.T) {
	cases := []struct {
		name    string
		profile string
		req     policy.Request
		want    string // substring of the rule; "" for no rule
	}{
		{"built-in deny", "guarded", policy.Request{Tool: "bash", Command: "git add -A"}, `builtin = "git-add-blind"`},
		{"dynamic command", "guarded", policy.Request{Tool: "bash", Command: "$CMD --x"}, `builtin = "dynamic-command"`},
		{"nested script", "guarded", policy.Request{Tool: "exec", Command: `eval "$X"`}, `builtin = "nested-script"`},
		{"strict", "strict", policy.Request{Tool: "bash", Command: "ls | make test"}, `prefix = "make test"`},
		{"strict argv", "strict", policy.Request{Tool: "shell.exec", Executable: "npm", Args: []string{"install", "left-pad"}}, `prefix = "npm install"`},
		{"strict quotes", "strict", policy.Request{Tool: "bash", Command: `touch "a\"b"`}, `must_match = ["touch \"a\\\"b\""]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Parse("a.toml", "profile = \""+c.profile+"\"\n")
			if err != nil {
				t.Fatal(err)
			}
			eng, _ := cfg.Engine()
			d := eng.Check(c.req)
			if d.Verdict == policy.Allow {
				t.Fatalf("the request is allowed to begin with")
			}
			rule := tool.AllowRule(c.req, d)
			if !strings.Contains(rule, c.want) || !strings.Contains(rule, `action = "allow"`) {
				t.Fatalf("rule %q lacks %q", rule, c.want)
			}
			cfg, err = config.Parse("b.toml", "profile = \""+c.profile+"\"\n\n"+rule)
			if err != nil {
				t.Fatalf("the rule does not load: %v\n%s", err, rule)
			}
			eng, _ = cfg.Engine()
			if d := eng.Check(c.req); d.Verdict != policy.Allow {
				t.Errorf("with the rule:\n%s\nstill %v (%s)", rule, d.Verdict, d.Rule)
			}
		})
	}
	for _, c := range []struct {
		d    policy.Decision
		want string
	}{
		{policy.Decision{Verdict: policy.Deny, Rule: "tool_grants"}, ""},
		{policy.Allowed, ""},
		{policy.Decision{Verdict: policy.Ask, Rule: "require_approval_for_unknown"}, "[tools.shell_exec]\nallow_executables = [\"terraform\"]\n"},
		{policy.Decision{Verdict: policy.Ask, Rule: "my-rule"}, `# the configured rule "my-rule" decides this`},
	} {
		if got := tool.AllowRule(policy.Request{Tool: "shell.exec", Executable: "/usr/bin/terraform"}, c.d); !strings.Contains(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("%+v: %q, want %q", c.d, got, c.want)
		}
	}
}

// FuzzAllowRule: whatever the command (it comes from the model), the
// printed rule is one [[rules]] entry that loads, allows nothing beyond
// its own form, and cannot smuggle other keys or tables into the file.
func FuzzAllowRule(f *testing.F) {
	for _, s := range []string{"git add -A", "$X y", "make test", "a\"\nprofile = \"open", "x '''\n[[rules]]", "\x00\x7f\u2028", "rm -rf \\\"/\\\""} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, command string, strict bool) {
		profile := "guarded"
		if strict {
			profile = "strict"
		}
		cfg, err := config.Parse("a.toml", "profile = \""+profile+"\"\n")
		if err != nil {
			t.Fatal(err)
		}
		eng, _ := cfg.Engine()
		req := policy.Request{Tool: "bash", Command: command}
		d := eng.Check(req)
		rule := tool.AllowRule(req, d)
		if rule == "" || strings.HasPrefix(rule, "#") {
			return
		}
		if strings.Count(rule, "\n[") != 0 || !strings.HasPrefix(rule, "[[rules]]\n") {
			t.Fatalf("the rule is not one [[rules]] entry:\n%s", rule)
		}
		cfg, err = config.Parse("b.toml", "profile = \""+profile+"\"\n\n"+rule)
		if err != nil {
			// must_match is checked at load: a command the checker reads
			// differently from a second reading may fail it, but never the
			// TOML itself.
			if strings.Contains(err.Error(), "must_match") {
				return
			}
			t.Fatalf("the rule does not load: %v\n%s", err, rule)
		}
		if cfg.Profile != profile || len(cfg.Rules) != 1 || cfg.Rules[0].Action != "allow" {
			t.Fatalf("the rule changed more than one rule: %+v\n%s", cfg, rule)
		}
	})
}
