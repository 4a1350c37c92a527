package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/agentexec/agentexec/egress"
	"github.com/agentexec/agentexec/tool"
)

// promptApprover asks a person on a terminal: the command, the rule and
// the reason, then yes once, no, or always for this rule in this session.
// After a "no" it prints the configuration rule that would allow the
// command, unless quiet (the caller prints it).
type promptApprover struct {
	in    io.Reader
	out   io.Writer
	quiet bool
}

// Approve shows the request and reads the answer.
func (p *promptApprover) Approve(ctx context.Context, req tool.ApprovalRequest) (tool.Approval, error) {
	r := req.Request
	what := r.Command
	if what == "" {
		what = strings.Join(append([]string{r.Executable}, r.Args...), " ")
	}
	who := "the " + req.Tool + " tool wants"
	if req.Tool == "run" {
		who = "you asked"
	}
	fmt.Fprintf(p.out, "\nagentexec: %s to run:\n    %s\n", who, what)
	if r.Cwd != "" {
		fmt.Fprintf(p.out, "  in %s\n", r.Cwd)
	}
	if len(r.EnvKeys) > 0 {
		fmt.Fprintf(p.out, "  with environment variables %s\n", strings.Join(r.EnvKeys, ", "))
	}
	rule := req.Decision.Rule
	if rule == "" {
		rule = "(default)"
	}
	fmt.Fprintf(p.out, "  rule %s: %s\n", rule, req.Decision.Reason)
	answers := make(chan string, 1)
	go func() {
		fmt.Fprint(p.out, "Allow it? [y] yes once, [n] no, [a] always for this rule in this session: ")
		line, _ := bufio.NewReader(p.in).ReadString('\n')
		answers <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case <-ctx.Done():
		return tool.Approval{}, ctx.Err()
	case a := <-answers:
		switch a {
		case "y", "yes":
			return tool.Approval{Approved: true}, nil
		case "a", "always":
			return tool.Approval{Approved: true, Remember: true}, nil
		}
		if rule := tool.AllowRule(r, req.Decision); rule != "" && !p.quiet {
			fmt.Fprintf(p.out, "Not run. To allow it without asking, add to the configuration:\n\n%s\n", rule)
		}
		return tool.Approval{Reason: "declined at the terminal"}, nil
	}
}

// ttyNetworkAsker asks a person at the terminal about a host the sandbox's
// network allowlist does not name (on_unknown = "ask" under run): once,
// for the rest of the run, or no.
func ttyNetworkAsker(ctx context.Context, q egress.Question) (egress.Answer, error) {
	tty, err := openTTY()
	if err != nil {
		return egress.Decline, fmt.Errorf("there is no terminal to ask on")
	}
	defer tty.Close()
	fmt.Fprintf(tty, "\nagentexec: the command wants to connect to %s port %d, which the sandbox's network allowlist does not name.\n", q.Host, q.Port)
	answers := make(chan string, 1)
	go func() {
		fmt.Fprint(tty, "Allow it? [y] yes once, [n] no, [a] always during this run: ")
		line, _ := bufio.NewReader(tty).ReadString('\n')
		answers <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(tty, "(no answer in time: refused)")
		return egress.Decline, ctx.Err()
	case a := <-answers:
		switch a {
		case "y", "yes":
			return egress.AllowOnce, nil
		case "a", "always":
			return egress.AllowSession, nil
		}
		return egress.Decline, nil
	}
}
