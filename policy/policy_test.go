package policy

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCombine(t *testing.T) {
	a := Decision{Verdict: Allow, Rule: "a"}
	ask := Decision{Verdict: Ask, Rule: "ask"}
	deny1 := Decision{Verdict: Deny, Rule: "d1"}
	deny2 := Decision{Verdict: Deny, Rule: "d2"}
	cases := []struct {
		in   []Decision
		want string
	}{
		{nil, ""}, {[]Decision{a}, ""}, {[]Decision{a, ask}, "ask"}, {[]Decision{ask, deny1, a}, "d1"}, {[]Decision{deny1, deny2}, "d1"},
	}
	for _, c := range cases {
		if got := Combine(c.in...); got.Rule != c.want {
			t.Errorf("Combine(%v) = %q, want %q", c.in, got.Rule, c.want)
		}
	}
	if got := CheckAll(Request{}, nil, CheckerFunc(func(Request) Decision { return ask })); got.Rule != "ask" {
		t.Errorf("CheckAll = %+v", got)
	}
}

func TestMessage(t *testing.T) {
	cases := []struct {
		d    Decision
		want string
	}{
		{Decision{Reason: "it is forbidden", Alternative: "Do X."}, "permission denied: it is forbidden. Do X."},
		{Decision{Reason: "ends with a period.", Alternative: "Do X."}, "permission denied: ends with a period. Do X."},
		{Decision{}, "permission denied"},
		{Decision{Text: "exact seed text", Reason: "r"}, "exact seed text"},
	}
	for _, c := range cases {
		if got := c.d.Message(); got != c.want {
			t.Errorf("Message() = %q, want %q", got, c.want)
		}
	}
}

func TestCommandPolicy(t *testing.T) {
	dir := t.TempDir()
	evilLs := filepath.Join(dir, "ls")
	os.WriteFile(evilLs, []byte("#!/bin/sh\n"), 0o755)
	link := filepath.Join(dir, "harmless")
	os.Symlink("/usr/bin/rm", link)
	lsPath, _ := filepath.EvalSymlinks("/bin/ls")
	rmPath, _ := filepath.EvalSymlinks("/bin/rm")
	p := &CommandPolicy{Allow: []string{"ls", "/usr/bin/env"}, Deny: []string{"rm", "/usr/bin/dd"}, RequireApprovalForUnknown: true}
	cases := []struct {
		name, exe, resolved string
		want                Verdict
		rule                string
	}{
		{"allowed name", "ls", lsPath, Allow, "allow_executables"},
		{"allowed name by path", "/bin/ls", lsPath, Allow, "allow_executables"},
		{"allowed name outside system dirs", evilLs, evilLs, Ask, "require_approval_for_unknown"},
		{"allowed path", "/usr/bin/env", "/usr/bin/env", Allow, "allow_executables"},
		{"denied name", "rm", rmPath, Deny, "deny_executables"},
		{"denied name as path", "/bin/rm", rmPath, Deny, "deny_executables"},
		{"denied name, not found", "rm", "", Deny, "deny_executables"},
		{"denied through a symlink", link, rmPath, Deny, "deny_executables"},
		{"denied path", "/usr/bin/dd", "/usr/bin/dd", Deny, "deny_executables"},
		{"denied path via /bin", "/bin/dd", "/usr/bin/dd", Deny, "deny_executables"},
		{"unknown", "uname", "/usr/bin/uname", Ask, "require_approval_for_unknown"},
		{"no executable", "", "", Allow, ""},
	}
	for _, c := range cases {
		d := p.Check(Request{Executable: c.exe, ResolvedPath: c.resolved})
		if d.Verdict != c.want || d.Rule != c.rule {
			t.Errorf("%s: %v %q (%s), want %v %q", c.name, d.Verdict, d.Rule, d.Reason, c.want, c.rule)
		}
		if d.Verdict != Allow && (d.Reason == "" || d.Alternative == "") {
			t.Errorf("%s: a refusal without reason or alternative: %+v", c.name, d)
		}
	}
	var zero CommandPolicy
	if d := zero.Check(Request{Executable: "anything"}); d.Verdict != Allow {
		t.Errorf("zero policy: %+v", d)
	}
}

func TestCommandPolicyValidate(t *testing.T) {
	for _, bad := range [][]string{{""}, {"bin/rm"}, {"./rm"}, {"a\x00b"}} {
		if err := (&CommandPolicy{Deny: bad}).Validate(); err == nil {
			t.Errorf("deny %q accepted", bad)
		}
	}
	if err := (&CommandPolicy{Allow: []string{"ls", "/usr/bin/git"}}).Validate(); err != nil {
		t.Error(err)
	}
}
