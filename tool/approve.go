package tool

import (
	"context"
	"sync"
)

// SessionApprover wraps an Approver and remembers answers of "always for
// this rule": within one conversation, later calls that ask because of the
// same rule are approved without asking again. It is safe for concurrent
// use.
type SessionApprover struct {
	Inner Approver

	mu     sync.Mutex
	always map[[2]string]bool // conversation, rule
}

// Approve asks Inner unless the rule was approved for the conversation.
func (s *SessionApprover) Approve(ctx context.Context, req ApprovalRequest) (Approval, error) {
	key := [2]string{req.Request.Conversation, req.Decision.Rule}
	s.mu.Lock()
	remembered := s.always[key]
	s.mu.Unlock()
	if remembered && req.Decision.Rule != "" {
		return Approval{Approved: true, Remember: true}, nil
	}
	a, err := s.Inner.Approve(ctx, req)
	if err == nil && a.Approved && a.Remember && req.Decision.Rule != "" {
		s.mu.Lock()
		if s.always == nil {
			s.always = map[[2]string]bool{}
		}
		s.always[key] = true
		s.mu.Unlock()
	}
	return a, err
}
