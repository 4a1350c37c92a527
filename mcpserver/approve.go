package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// approvalTTL bounds how long a client may take to answer.
const approvalTTL = 10 * time.Minute

// inputID names the one input request an approval makes.
const inputID = "approve"

// approvalState is what the server hands the client with an approval
// request and gets back with the answer. It is signed, so a client cannot
// make one up or change it, and bound to the session, the tool, the exact
// arguments and the rule that asked.
type approvalState struct {
	Session string `json:"s"`
	Tool    string `json:"t"`
	Args    string `json:"a"`
	Rule    string `json:"r"`
	Expires int64  `json:"e"`
}

func hashHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (s *Server) sign(st approvalState) string {
	payload, _ := json.Marshal(st)
	mac := hmac.New(sha256.New, s.secret)
	mac.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// verify returns the state if token was signed by this server.
func (s *Server) verify(token string) (approvalState, bool) {
	var st approvalState
	p, m, ok := strings.Cut(token, ".")
	if !ok {
		return st, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	sum, err2 := base64.RawURLEncoding.DecodeString(m)
	if err1 != nil || err2 != nil {
		return st, false
	}
	mac := hmac.New(sha256.New, s.secret)
	mac.Write(payload)
	if !hmac.Equal(mac.Sum(nil), sum) {
		return st, false
	}
	if json.Unmarshal(payload, &st) != nil {
		return st, false
	}
	return st, true
}

// pendingApproval receives the decision of a call that must be approved
// through the client.
type pendingApproval struct {
	decision *policy.Decision
	request  policy.Request
}

// approvalAnswer is a verified answer from the client.
type approvalAnswer struct {
	rule   string
	always bool
}

// approver answers the registry's question for one call: a rule approved
// "always" in this session, or the verified answer of a retry, approves;
// otherwise, if the client can show the user a question, the approval is
// pending (and asked through the client); if not, nil refuses.
func (s *Server) approver(se *session, req *mcp.CallToolRequest, answer *approvalAnswer, pending *pendingApproval) tool.Approver {
	canAsk := false
	if caps := req.ClientCapabilities(); caps != nil && caps.Elicitation != nil {
		canAsk = true
	}
	return tool.ApproverFunc(func(ctx context.Context, ar tool.ApprovalRequest) (tool.Approval, error) {
		rule := ar.Decision.Rule
		se.mu.Lock()
		always := se.approved[rule]
		se.mu.Unlock()
		switch {
		case always && rule != "":
			return tool.Approval{Approved: true}, nil
		case answer != nil && answer.rule == rule:
			if answer.always && rule != "" {
				se.mu.Lock()
				se.approved[rule] = true
				se.mu.Unlock()
			}
			return tool.Approval{Approved: true}, nil
		case !canAsk:
			return tool.Approval{}, fmt.Errorf("this MCP client cannot ask the user (it does not support elicitation); " +
				"to allow the command without asking, add a rule with action \"allow\" to the agentexec configuration")
		}
		d := ar.Decision
		pending.decision, pending.request = &d, ar.Request
		return tool.Approval{}, tool.ErrApprovalPending
	})
}

// askResult asks the client to put the question to the user.
func (s *Server) askResult(se *session, name string, args []byte, p *pendingApproval) *mcp.CallToolResult {
	d, r := p.decision, p.request
	what := r.Command
	if what == "" {
		what = strings.TrimSpace(strings.Join(append([]string{r.Executable}, r.Args...), " "))
	}
	msg := fmt.Sprintf("Allow the %s tool to run this?\n\n    %s\n\nin %s\n\nagentexec asks because of rule %q: %s", name, what, r.Cwd, d.Rule, d.Reason)
	st := approvalState{Session: se.id, Tool: name, Args: argsHash(args), Rule: d.Rule, Expires: time.Now().Add(approvalTTL).Unix()}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{inputID: &mcp.ElicitParams{
			Mode:    "form",
			Message: msg,
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{"always":{"type":"boolean","title":"Allow this rule for the rest of the session",` +
				`"default":false}}}`),
		}},
		RequestState: s.sign(st),
	}
}

// readAnswer verifies a retry's state and reads the user's answer. It
// returns the answer to approve with, or the result that refuses the
// call.
func (s *Server) readAnswer(se *session, name string, args []byte, p *mcp.CallToolParamsRaw) (*approvalAnswer, *mcp.CallToolResult) {
	refuse := func(msg string) *mcp.CallToolResult { return textResult(msg, true) }
	st, ok := s.verify(p.RequestState)
	switch {
	case !ok:
		return nil, refuse("permission denied: the approval state of this call was not issued by this agentexec server; the command did not run")
	case st.Session != se.id || st.Tool != name || st.Args != argsHash(args):
		return nil, refuse("permission denied: the approval was given for another call; the command did not run. Call the tool again to be asked afresh")
	case time.Now().Unix() > st.Expires:
		return nil, refuse("permission denied: the approval request expired; the command did not run. Call the tool again to be asked afresh")
	}
	resp, ok := p.InputResponses[inputID].(*mcp.ElicitResult)
	if !ok {
		return nil, refuse("permission denied: no answer to the approval request came back; the command did not run")
	}
	switch resp.Action {
	case "accept":
		always, _ := resp.Content["always"].(bool)
		return &approvalAnswer{rule: st.Rule, always: always}, nil
	case "decline":
		return nil, refuse("permission denied: the user declined this command. Do not retry it unchanged; ask the user how to proceed")
	}
	return nil, refuse("permission denied: the user dismissed the approval request; the command did not run")
}
