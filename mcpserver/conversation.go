package mcpserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Conversation handles. A conversation scopes approvals "for this
// session" and job ownership. On stdio and on HTTP sessions (protocol
// revisions before 2026-07-28) it is the session; on protocol 2026-07-28,
// which has no sessions, every answer to tools/call carries the handle of
// the conversation it ran in, under _meta["io.agentexec/conversation"], and
// a client continues the conversation by sending that handle back in the
// _meta of its next calls. Every transport hands out and accepts the same
// handles. A handle is minted and signed by the server (unguessable,
// unforgeable), is bound to the credential (token) that obtained it, lives
// HandleLifetime from when it was minted, and is refused with the reason
// when expired, forged, or from before a restart of the server.
const (
	// MetaConversation is the _meta key of the conversation handle.
	MetaConversation = "io.agentexec/conversation"
	// HandleLifetime is how long a conversation handle is valid.
	HandleLifetime = 24 * time.Hour
	// maxConversations bounds the conversations remembered (least
	// recently used forgotten first).
	maxConversations = 10000
)

// credentialHeader carries, from the HTTP handler to the tool handler,
// the credential the request presented; the handler replaces any value a
// client sent.
const credentialHeader = "X-Agentexec-Credential"

// ErrHandle is the class of conversation handle errors.
var ErrHandle = errors.New("conversation handle refused")

// mintHandle returns a handle for conversation id, bound to cred.
func (s *Server) mintHandle(id, cred string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	body := base64.RawURLEncoding.EncodeToString([]byte(id + "." + exp))
	return "agx1." + body + "." + s.handleMAC(id, exp, cred)
}

func (s *Server) handleMAC(id, exp, cred string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("conversation\x00" + id + "\x00" + exp + "\x00" + cred))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// openHandle checks a handle and returns its conversation id and expiry.
func (s *Server) openHandle(h, cred string, now time.Time) (string, time.Time, error) {
	parts := strings.Split(h, ".")
	if len(parts) != 3 || parts[0] != "agx1" {
		return "", time.Time{}, fmt.Errorf("%w: %q is not an agentexec conversation handle; send back the value of _meta[%q] from an earlier answer, or none to start a new conversation", ErrHandle, shortenText(h, 40), MetaConversation)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	id, exp, ok := strings.Cut(string(raw), ".")
	if err != nil || !ok {
		return "", time.Time{}, fmt.Errorf("%w: the handle is damaged; send none to start a new conversation", ErrHandle)
	}
	if !hmac.Equal([]byte(parts[2]), []byte(s.handleMAC(id, exp, cred))) {
		return "", time.Time{}, fmt.Errorf("%w: the handle was not issued by this server to this client (or the server has restarted since); send none to start a new conversation", ErrHandle)
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: the handle is damaged", ErrHandle)
	}
	expires := time.Unix(unix, 0)
	if !now.Before(expires) {
		return "", time.Time{}, fmt.Errorf("%w: the conversation's handle expired at %s (handles live %s); send none to start a new conversation (approvals given in the old one must be given again; its jobs keep running and can be listed with `agentexec jobs`)", ErrHandle, expires.UTC().Format(time.RFC3339), HandleLifetime)
	}
	return id, expires, nil
}

// conversationFor returns the conversation a call runs in: the one its
// handle names, else the transport session's (stdio, HTTP sessions), else
// (protocol 2026-07-28 without a handle) a new one. It returns the handle
// to hand back.
func (s *Server) conversationFor(se *session, req *mcp.CallToolRequest) (*session, string, error) {
	cred, stateless := "stdio", false
	if req.Extra != nil && req.Extra.Header != nil {
		cred = req.Extra.Header.Get(credentialHeader)
		stateless = IsStateless(req.Extra.Header.Get("Mcp-Protocol-Version"))
	}
	now := time.Now()
	if h, _ := req.Params.GetMeta()[MetaConversation].(string); h != "" {
		id, expires, err := s.openHandle(h, cred, now)
		if err != nil {
			return nil, "", err
		}
		return s.conversation(id, expires, nil), h, nil
	}
	if stateless {
		var b [12]byte
		rand.Read(b[:])
		expires := now.Add(HandleLifetime)
		id := "conv-" + hex.EncodeToString(b[:])
		return s.conversation(id, expires, nil), s.mintHandle(id, cred, expires), nil
	}
	s.mu.Lock()
	expires := se.expires
	if expires.IsZero() || !now.Before(expires) {
		// A session outliving a handle's lifetime gets a fresh handle for
		// the same conversation.
		expires = now.Add(HandleLifetime)
		se.expires = expires
	}
	se.lastUsed = now
	s.mu.Unlock()
	return se, s.mintHandle(se.id, cred, expires), nil
}

// conversation returns the record of conversation id, creating it (or
// adopting se for it) on first use.
func (s *Server) conversation(id string, expires time.Time, se *session) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.convs == nil {
		s.convs = map[string]*session{}
	}
	now := time.Now()
	if c, ok := s.convs[id]; ok {
		c.lastUsed = now
		return c
	}
	if se == nil {
		se = &session{id: id, sem: make(chan struct{}, s.o.MaxCalls), approved: map[string]bool{}}
	}
	se.lastUsed, se.expires = now, expires
	if len(s.convs) >= maxConversations {
		var oldest string
		var at time.Time
		for k, c := range s.convs {
			if oldest == "" || c.lastUsed.Before(at) {
				oldest, at = k, c.lastUsed
			}
		}
		delete(s.convs, oldest)
	}
	s.convs[id] = se
	return se
}
