package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/agentexec/agentexec/egress"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// liveCalls are the client sessions with a tool call running: the egress
// proxy asks about a host no rule names through the one client whose
// commands can be making the connection.
type liveCalls struct {
	mu       sync.Mutex
	sessions map[*mcp.ServerSession]int
	canAsk   map[*mcp.ServerSession]bool
	// allowed holds each client session's "allow for the rest of the
	// session" answers (host:port), so that one client's approval never
	// lets another client's commands through; forgotten with the session.
	allowed map[*mcp.ServerSession]map[string]bool
}

// remembered says whether ss's user allowed key for the session.
func (l *liveCalls) remembered(ss *mcp.ServerSession, key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.allowed[ss][key]
}

// remember records ss's "allow for the session" of key, while ss has
// calls running (a session that ended is not kept alive by it).
func (l *liveCalls) remember(ss *mcp.ServerSession, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions[ss] == 0 {
		return
	}
	if l.allowed == nil {
		l.allowed = map[*mcp.ServerSession]map[string]bool{}
	}
	if l.allowed[ss] == nil {
		l.allowed[ss] = map[string]bool{}
	}
	l.allowed[ss][key] = true
}

// forget drops what ss's user allowed (its session ended).
func (l *liveCalls) forget(ss *mcp.ServerSession) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.allowed, ss)
}

// enter records a running call of ss; the returned func ends it.
func (l *liveCalls) enter(ss *mcp.ServerSession, canAsk bool) func() {
	if ss == nil {
		return func() {}
	}
	l.mu.Lock()
	if l.sessions == nil {
		l.sessions, l.canAsk = map[*mcp.ServerSession]int{}, map[*mcp.ServerSession]bool{}
	}
	l.sessions[ss]++
	l.canAsk[ss] = canAsk
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		if l.sessions[ss]--; l.sessions[ss] <= 0 {
			delete(l.sessions, ss)
			delete(l.canAsk, ss)
		}
		l.mu.Unlock()
	}
}

// only returns the one session with calls running, if there is exactly
// one.
func (l *liveCalls) only() (*mcp.ServerSession, bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ss := range l.sessions {
		if len(l.sessions) == 1 {
			return ss, l.canAsk[ss], 1
		}
	}
	return nil, false, len(l.sessions)
}

// askNetwork is the egress proxy's Asker: it asks the user of the one
// client whose calls are running (MCP elicitation, as for commands). With
// several clients' calls running it cannot tell whose command connects,
// and refuses rather than ask the wrong person.
func (s *Server) askNetwork(ctx context.Context, q egress.Question) (egress.Answer, error) {
	ss, canAsk, n := s.live.only()
	switch {
	case n == 0:
		return egress.Decline, errors.New("no tool call is running to ask its user")
	case n > 1:
		return egress.Decline, fmt.Errorf("calls of %d clients are running, and agentexec cannot tell whose command connects; allow the host in [sandbox.network] allow instead", n)
	case !canAsk:
		return egress.Decline, errors.New("this MCP client cannot ask the user (it does not support elicitation); allow the host in [sandbox.network] allow instead")
	}
	key := net.JoinHostPort(q.Host, strconv.Itoa(q.Port))
	if s.live.remembered(ss, key) {
		return egress.AllowRemembered, nil
	}
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{
		Mode: "form",
		Message: fmt.Sprintf("A sandboxed command wants to connect to %s port %d, which is not on the sandbox's network allowlist. Allow it?\n\n"+
			"Accept allows this connection; tick the box to allow the host and port for the rest of the session.", q.Host, q.Port),
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"always":{"type":"boolean","title":"Allow this host and port for the rest of the session","default":false}}}`),
	})
	if err != nil {
		return egress.Decline, fmt.Errorf("the user could not be asked while the command runs (%v); ask the user to allow the host in [sandbox.network] allow, or with --allow-host", err)
	}
	if res.Action != "accept" {
		return egress.Decline, nil
	}
	if always, _ := res.Content["always"].(bool); always {
		// Kept for this client only: the proxy serves every client, and
		// its own session memory would let the others through.
		s.live.remember(ss, key)
		return egress.AllowRemembered, nil
	}
	return egress.AllowOnce, nil
}
