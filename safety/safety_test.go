package safety

import (
	"errors"
	"flag"
	"mvdan.cc/sh/v3/syntax"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
)

func summary(r *Report) string {
	if r.ParseError != nil {
		return "parse"
	}
	var ids []string
	for _, f := range r.Findings {
		ids = append(ids, f.Rule)
	}
	sort.Strings(ids)
	ids = dedupe(ids)
	if len(r.Unanalysable) > 0 {
		ids = append([]string{"dyn"}, ids...)
	}
	return strings.Join(ids, ",")
}

func dedupe(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func TestCases(t *testing.T) {
	if len(cases) < 150 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		r := Analyze(c.src, nil)
		if got := summary(r); got != c.want {
			var cmds []string
			for _, cmd := range r.Commands {
				cmds = append(cmds, cmd.String())
			}
			t.Errorf("%q: got %q, want %q (commands: %q, parse error: %v)", c.src, got, c.want, cmds, r.ParseError)
		}
	}
}

// TestCasesAreBash proves every case is valid bash, so none passes only
// because bash itself would refuse it.
func TestCasesAreBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	srcs := make([]string, len(cases))
	for i, c := range cases {
		srcs[i] = c.src
	}
	checkBash(t, bash, "cases", srcs)
}

// checkBash has bash parse each source, a few at a time.
func checkBash(t *testing.T, bash, class string, srcs []string) {
	jobs := make(chan string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for src := range jobs {
				if out, err := bashParse(bash, src); err != nil {
					t.Errorf("%s: %q is not valid bash: %v: %s", class, src, err, out)
				}
			}
		}()
	}
	for _, s := range srcs {
		jobs <- s
	}
	close(jobs)
	wg.Wait()
}

func TestSeedMessages(t *testing.T) {
	want := map[string]string{
		"git add -A":       "permission denied: blind git add commands (git add -A, git add ., git add --all, git add *) are not allowed, specify files explicitly",
		"git push --force": "permission denied: git push --force is not allowed. Use --force-with-lease for safer force pushes, or push without force",
		"rm -rf /":         "permission denied: this rm command could delete critical data (.git, home directory, or root). Specify the full path explicitly (no wildcards, ~, or $HOME)",
	}
	for src, msg := range want {
		r := Analyze(src, nil)
		if len(r.Findings) != 1 || r.Findings[0].Message != msg {
			t.Errorf("%s: %+v", src, r.Findings)
		}
	}
}

func TestParseError(t *testing.T) {
	for _, src := range []string{`echo "unterminated`, `if true; then`, `(`, `rm -rf / )`, `$(`} {
		r := Analyze(src, nil)
		var pe *ParseError
		if !errors.As(r.ParseError, &pe) || len(r.Commands) != 0 {
			t.Errorf("%q: %v", src, r.ParseError)
		}
	}
}

func TestCommandsReported(t *testing.T) {
	r := Analyze(`sudo -u bob env FOO=1 timeout 5 git -C "a b" status; x=$(ls -1 $DIR) && find . -exec wc -l {} +`, nil)
	var got []string
	for _, c := range r.Commands {
		got = append(got, c.String())
	}
	want := []string{
		"[sudo] [env] [timeout] git -C 'a b' status",
		"ls -1 <dynamic $DIR>",
		"",
		"find . -exec wc -l '{}' +",
		"[find -exec] wc -l '{}'",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c := r.Commands[0]; c.Name != "git" || strings.Join(c.Assigns, ",") != "FOO" || c.Pos != "1:1" {
		t.Errorf("first command %+v", c)
	}
}

func TestDisabled(t *testing.T) {
	r := Analyze(`git push -f; rm -rf /`, &Options{Disabled: map[string]bool{RuleGitPushForce: true}})
	if summary(r) != "rm-critical" {
		t.Errorf("got %q", summary(r))
	}
}

func TestAnalyzeArgv(t *testing.T) {
	cases := []struct {
		argv []string
		want string
	}{
		{[]string{"rm", "-rf", "/"}, "rm-critical"},
		{[]string{"/bin/bash", "-c", "git push -f"}, "git-push-force"},
		{[]string{"sudo", "git", "add", "."}, "git-add-blind"},
		{[]string{"echo", "rm -rf /"}, ""},
		{[]string{"rm", "-rf", "$HOME"}, ""}, // argv: no expansion, a file named $HOME
		{[]string{"env", "LD_PRELOAD=/x.so", "ls"}, "loader-env"},
	}
	for _, c := range cases {
		if got := summary(AnalyzeArgv(c.argv, nil)); got != c.want {
			t.Errorf("%q: got %q, want %q", c.argv, got, c.want)
		}
	}
}

// FuzzAnalyze: the checker never panics, gives the same answer twice, and
// never passes as clean a script that bash itself refuses to parse.
func FuzzAnalyze(f *testing.F) {
	for _, c := range cases {
		f.Add(c.src)
	}
	if fl := flag.Lookup("test.fuzz"); fl != nil && fl.Value.String() != "" {
		// when fuzzing: start from the evasion shapes too (the tests
		// check them against bash already)
		for _, cs := range evasions {
			for _, c := range cs {
				f.Add(c.src)
			}
		}
	}
	bash, _ := exec.LookPath("bash")
	checked := map[string]bool{} // TestCasesAreBash and TestEvasionsAreBash run bash on these
	for _, c := range cases {
		checked[c.src] = true
	}
	for _, cs := range evasions {
		for _, c := range cs {
			checked[c.src] = true
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		r1, r2 := Analyze(src, nil), Analyze(src, nil)
		if summary(r1) != summary(r2) || len(r1.Commands) != len(r2.Commands) {
			t.Fatalf("not deterministic: %q vs %q", summary(r1), summary(r2))
		}
		for i := range r1.Commands {
			if r1.Commands[i].String() != r2.Commands[i].String() {
				t.Fatalf("not deterministic: %q vs %q", r1.Commands[i].String(), r2.Commands[i].String())
			}
		}
		if bash == "" || r1.ParseError != nil || strings.IndexByte(src, 0) >= 0 || len(src) > 4096 || checked[src] {
			return
		}
		if out, err := bashParse(bash, src); err != nil {
			t.Fatalf("bash refuses %q (%s) but the checker parsed it", src, out)
		}
	})
}

// bashParse asks bash to parse src as a script (read from stdin, without
// running it).
func bashParse(bash, src string) ([]byte, error) {
	cmd := exec.Command(bash, "-n")
	cmd.Stdin = strings.NewReader(src)
	return cmd.CombinedOutput()
}

// typical is a 200-character command of the kind agents send.
const typical = `cd /work/project && git status --short && go test ./... -run 'TestFoo|TestBar' -count=1 2>&1 | tail -n 50; git diff --stat HEAD~1 -- src/ tests/ && sudo make lint FLAGS="-v"`

// BenchmarkAnalyze compares the checker with a bare parse of the same
// source (the target is a ratio of at most 3).
func BenchmarkAnalyze(b *testing.B) {
	script := strings.Repeat(typical+"\n"+`for f in $(ls *.go); do if grep -q TODO "$f"; then echo "$f"; fi; done`+"\n", 45)[:10<<10]
	script = script[:strings.LastIndexByte(script, '\n')]
	for _, in := range []struct{ name, src string }{{"200B", typical}, {"10KB", script}} {
		b.Run(in.name+"/baseline=syntax.Parse", func(b *testing.B) {
			b.SetBytes(int64(len(in.src)))
			for b.Loop() {
				if _, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(in.src), ""); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/Analyze", func(b *testing.B) {
			b.SetBytes(int64(len(in.src)))
			for b.Loop() {
				if r := Analyze(in.src, nil); r.ParseError != nil {
					b.Fatal(r.ParseError)
				}
			}
		})
	}
}
