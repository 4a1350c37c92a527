package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/agentexec/agentexec/tool"
)

// promptApprover asks a person on a terminal: the command, the rule and
// the reason, then yes once, no, or always for this rule in this session.
type promptApprover struct {
	in  io.Reader
	out io.Writer
}

// Approve shows the request and reads the answer.
func (p *promptApprover) Approve(ctx context.Context, req tool.ApprovalRequest) (tool.Approval, error) {
	r := req.Request
	what := r.Command
	if what == "" {
		what = strings.Join(append([]string{r.Executable}, r.Args...), " ")
	}
	fmt.Fprintf(p.out, "\nagentexec: the %s tool wants to run:\n    %s\n", req.Tool, what)
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
		return tool.Approval{Reason: "declined at the terminal"}, nil
	}
}
