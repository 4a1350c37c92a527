// Package mcpserver serves a host's tools over the Model Context Protocol
// (the official go-sdk): stdio for agent hosts that start agentexec as a
// subprocess, streamable HTTP for everything else. Calls go through the
// host's registry (grants, policy, audit) exactly as `agentexec call` does;
// the server adds what MCP brings: progress notifications, cancellation by
// the client (and by its going away), approvals asked of the user through
// the client, and one conversation per MCP session.
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/tool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of Options.
const (
	DefaultProgressInterval = 250 * time.Millisecond
	DefaultMaxCalls         = 16
	DefaultMaxCallsTotal    = 64
	DefaultMaxSessions      = 64
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// Name and Version identify the server to clients.
	Name, Version string
	// ProgressInterval is the least time between two progress
	// notifications of one call; zero means DefaultProgressInterval.
	ProgressInterval time.Duration
	// MaxCalls bounds the calls one session may have running at once; a
	// call beyond it is refused with a message. Zero means
	// DefaultMaxCalls.
	MaxCalls int
	// MaxCallsTotal bounds the calls running at once in all sessions;
	// zero means DefaultMaxCallsTotal.
	MaxCallsTotal int
	// MaxSessions bounds the HTTP sessions open at once: a new client
	// beyond it is refused (503) until one ends or expires. Zero means
	// DefaultMaxSessions.
	MaxSessions int
	// Secret signs approval state handed to clients; nil means a random
	// secret for the life of the process.
	Secret []byte
	// MaxLineBytes bounds one message over stdio; zero means
	// DefaultMaxLineBytes.
	MaxLineBytes int
	// Logger receives the server's diagnostics; nil discards them.
	Logger *slog.Logger
}

// Server is an MCP server over a host's registry.
type Server struct {
	h      *host.Host
	o      Options
	srv    *mcp.Server
	secret []byte
	log    *slog.Logger

	// draining: the server takes no new requests (see Drain).
	draining atomic.Bool
	// ctx ends every call when the server shuts down.
	ctx    context.Context
	cancel context.CancelFunc
	calls  sync.WaitGroup

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session
	convs    map[string]*session // conversations by id (see conversation.go)
	live     liveCalls           // sessions with calls running (see egress.go)

	// binds ties each HTTP session to the credential that created it.
	binds bindings
	// newSession serialises the creation of HTTP sessions.
	newSession sync.Mutex
	// calls running in all sessions (MaxCallsTotal).
	callSem chan struct{}
	// audit is the registry's sink, watched for /healthz.
	audit *watchedSink

	// requests are the HTTP requests (POSTs) in progress, by the id the
	// HTTP handler put in their requestHeader: a call ends when the
	// request that carried it is gone.
	reqMu    sync.Mutex
	requests map[string]context.Context
	reqSeq   uint64
}

// session is what the server keeps per MCP session.
type session struct {
	id       string
	sem      chan struct{}
	ctx      context.Context // ends the session's calls when it goes away
	cancel   context.CancelFunc
	mu       sync.Mutex
	approved map[string]bool // rules approved "always" in this session
	// lastUsed and expires: when the conversation was last used, and
	// when its handle expires (guarded by Server.mu).
	lastUsed, expires time.Time
}

// New builds a server exposing every tool of h's registry.
func New(h *host.Host, o Options) *Server {
	if o.Name == "" {
		o.Name = "agentexec"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = DefaultMaxCalls
	}
	if o.MaxCallsTotal <= 0 {
		o.MaxCallsTotal = DefaultMaxCallsTotal
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	s := &Server{h: h, o: o, secret: o.Secret, sessions: map[*mcp.ServerSession]*session{}, log: o.Logger, callSem: make(chan struct{}, o.MaxCallsTotal)}
	if h.Registry.Audit != nil {
		s.audit = &watchedSink{inner: h.Registry.Audit}
		h.Registry.Audit = s.audit
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.secret == nil {
		s.secret = make([]byte, 32)
		rand.Read(s.secret)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = mcp.NewServer(&mcp.Implementation{Name: o.Name, Title: "agentexec", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "Tools that run commands on this machine. Long output is truncated with a note saying how much was cut; " +
			"commands the policy refuses come back with the reason and an alternative.",
		Logger:       o.Logger,
		Capabilities: &mcp.ServerCapabilities{},
	})
	for _, e := range h.Registry.List() {
		s.srv.AddTool(mcpTool(e, h.Call("")), s.handler(e.Name))
	}
	if h.Egress != nil && h.Egress.Ask == nil {
		h.Egress.Ask = s.askNetwork // on_unknown = "ask"
	}
	if obs := h.Registry.Observer; obs != nil {
		s.srv.AddReceivingMiddleware(s.observeRequests(obs))
	}
	return s
}

// MCP returns the underlying go-sdk server.
func (s *Server) MCP() *mcp.Server { return s.srv }

// mcpTool describes a registered tool for MCP.
func mcpTool(e tool.Entry, call *tool.Call) *mcp.Tool {
	t := &mcp.Tool{Name: e.Name, Description: e.Tool.Description(call), InputSchema: e.Tool.InputSchema()}
	if os, ok := e.Tool.(tool.OutputSchemer); ok {
		t.OutputSchema = os.OutputSchema()
	}
	if an, ok := e.Tool.(tool.Annotator); ok {
		a := an.Annotations()
		destructive, open := a.Destructive, a.OpenWorld
		t.Annotations = &mcp.ToolAnnotations{Title: a.Title, ReadOnlyHint: a.ReadOnly, DestructiveHint: &destructive, IdempotentHint: a.Idempotent, OpenWorldHint: &open}
		t.Title = a.Title
	}
	return t
}

// sessionOf returns (creating it on first use) the server's record of ss.
func (s *Server) sessionOf(ss *mcp.ServerSession) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if se, ok := s.sessions[ss]; ok {
		return se
	}
	// The conversation id is recorded (audit log, job records, both
	// readable by the commands the server runs): it is never the session
	// id, which is a bearer secret, but a keyed hash of it.
	var id string
	if sid := ss.ID(); sid != "" {
		id = s.sessionKey(sid)[:16]
	} else {
		var b [8]byte
		rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	se := &session{id: "mcp-" + id, sem: make(chan struct{}, s.o.MaxCalls), approved: map[string]bool{}}
	se.ctx, se.cancel = context.WithCancel(s.ctx)
	s.sessions[ss] = se
	if s.convs == nil {
		s.convs = map[string]*session{}
	}
	se.lastUsed = time.Now()
	s.convs[se.id] = se
	go func() {
		// A client that goes away (stdio EOF, HTTP session closed) cancels
		// everything it started in the foreground.
		ss.Wait()
		se.cancel()
		s.h.EndConversation(se.id) // its interactive sessions end with it
		s.live.forget(ss)          // and its network approvals
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
	}()
	return se
}

// handler serves calls of the tool exposed as name.
func (s *Server) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if s.ctx.Err() != nil {
			return textResult("agentexec is shutting down; the command did not run", true), nil
		}
		// Counted first, so that the limits below are released before
		// Shutdown (and tests) see the call gone.
		s.calls.Add(1)
		defer s.calls.Done()
		se := s.sessionOf(req.Session)
		defer s.live.enter(req.Session, req.ClientCapabilities() != nil && req.ClientCapabilities().Elicitation != nil)()
		conv, handle, err := s.conversationFor(se, req)
		if err != nil {
			return textResult(strings.TrimPrefix(err.Error(), ErrHandle.Error()+": "), true), nil
		}
		select {
		case conv.sem <- struct{}{}:
			defer func() { <-conv.sem }()
		default:
			return s.refuse(ctx, conv, name, "session_call_limit", fmt.Sprintf("too many calls are running in this session (the limit is %d, server.max_calls_per_session); wait for one to finish, "+
				"or use mode=\"background\" for long commands", s.o.MaxCalls)), nil
		}
		select {
		case s.callSem <- struct{}{}:
			defer func() { <-s.callSem }()
		default:
			return s.refuse(ctx, conv, name, "server_call_limit", fmt.Sprintf("too many calls are running on this agentexec server for all its clients (the limit is %d, server.max_calls); "+
				"wait a moment and try again", s.o.MaxCallsTotal)), nil
		}
		// The call ends when the client cancels it, the session goes away,
		// the HTTP request that carried it is gone, or the server shuts
		// down.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(se.ctx, cancel)
		defer stop()
		if req.Extra != nil && req.Extra.Header != nil {
			if id := req.Extra.Header.Get(requestHeader); id != "" {
				rctx := s.request(id)
				if rctx == nil {
					return textResult("the client's request is gone; the command did not run", true), nil
				}
				stopReq := context.AfterFunc(rctx, cancel)
				defer stopReq()
			}
		}

		call := s.h.Call(conv.id)
		args := req.Params.Arguments

		// Approvals: a retry carries the user's answer and our signed state.
		var answer *approvalAnswer
		if req.Params.RequestState != "" || len(req.Params.InputResponses) > 0 {
			a, refusal := s.readAnswer(conv, name, args, req.Params)
			if refusal != nil {
				return withHandle(refusal, handle), nil
			}
			answer = a
		}
		pending := &pendingApproval{}
		call.Approver = s.approver(conv, req, answer, pending)

		if token := req.Params.GetProgressToken(); token != nil {
			p := newProgress(req.Session, token, s.o.ProgressInterval)
			call.OnOutput = p.output
			p.start(ctx)
			defer p.stop()
		}
		res := s.h.Registry.Dispatch(ctx, call, name, args)
		if res.Kind == tool.KindApprovalPending && pending.decision != nil {
			return withHandle(s.askResult(conv, name, args, pending), handle), nil
		}
		return withHandle(toMCP(res), handle), nil
	}
}

// withHandle puts the conversation's handle in a result's _meta.
func withHandle(r *mcp.CallToolResult, handle string) *mcp.CallToolResult {
	if handle != "" {
		if r.Meta == nil {
			r.Meta = mcp.Meta{}
		}
		r.Meta[MetaConversation] = handle
	}
	return r
}

// refuse answers a call refused by a limit, and records the refusal in the
// audit log and for the registry's observer (a call that did not run is
// still a call).
func (s *Server) refuse(ctx context.Context, se *session, name, rule, text string) *mcp.CallToolResult {
	if obs := s.h.Registry.Observer; obs != nil {
		obs.Ended(ctx, name, &tool.Result{Text: text, IsError: true, Kind: tool.KindPermissionDenied}, 0)
	}
	sink := s.h.Registry.Audit
	if sink != nil {
		var b [8]byte
		rand.Read(b[:])
		ev := audit.Event{
			Time: time.Now().UTC(), Type: audit.Denied, CallID: hex.EncodeToString(b[:]), Tool: name, Conversation: se.id,
			Decision: "deny", Rule: rule, Reason: text, ErrorKind: "limit",
		}
		if obs := s.h.Registry.Observer; obs != nil {
			ev.TraceID = obs.TraceID(ctx)
		}
		err := sink.Write(ev)
		if err != nil && s.h.Registry.OnAuditError != nil {
			s.h.Registry.OnAuditError(err)
		}
	}
	return textResult(text, true)
}

// watchedSink remembers whether the last audit write failed, for
// /healthz.
type watchedSink struct {
	inner audit.Sink
	mu    sync.Mutex
	err   error
}

// Write writes to the inner sink and remembers the outcome.
func (w *watchedSink) Write(e audit.Event) error {
	err := w.inner.Write(e)
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	return err
}

// lastError is the error of the last write, nil when it succeeded.
func (w *watchedSink) lastError() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Drain makes the server refuse new requests (503 with a reason, over
// HTTP) and report itself not ready (/readyz), while what runs goes on
// until Shutdown ends it. It is the first thing a server does on SIGTERM,
// so that a load balancer stops sending it work.
func (s *Server) Drain() { s.draining.Store(true) }

// Health says whether the server can serve calls: nil, or why not (it is
// draining or shutting down; the audit log cannot be written and
// audit.fail_closed refuses every call).
func (s *Server) Health() error {
	if s.draining.Load() || s.ctx.Err() != nil {
		return errors.New("shutting down: this agentexec server takes no new calls (it got SIGTERM, or was stopped)")
	}
	if err := s.audit.lastError(); err != nil && s.h.Registry.FailClosed {
		return fmt.Errorf("degraded: the audit log cannot be written (%v) and audit.fail_closed is set, so every call is refused", err)
	}
	return nil
}

// requestHeader carries, from the HTTP handler to the tool handler, the id
// under which the HTTP request's context is kept. The HTTP handler sets it
// on every POST, replacing any value the client sent.
const requestHeader = "X-Agentexec-Request"

// trackRequest keeps ctx, an HTTP request's context, until the returned
// function is called, under the returned id.
func (s *Server) trackRequest(ctx context.Context) (string, func()) {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	if s.requests == nil {
		s.requests = map[string]context.Context{}
	}
	s.reqSeq++
	id := strconv.FormatUint(s.reqSeq, 10)
	s.requests[id] = ctx
	return id, func() {
		s.reqMu.Lock()
		delete(s.requests, id)
		s.reqMu.Unlock()
	}
}

// request returns the context of HTTP request id, or nil once it is over.
func (s *Server) request(id string) context.Context {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	return s.requests[id]
}

// endSession cancels the calls of the session the SDK knows as id (the
// client deleted it). The SDK itself would wait for them to finish first.
func (s *Server) endSession(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ss, se := range s.sessions {
		if ss.ID() == id {
			se.cancel()
		}
	}
}

// toMCP turns a tool result into an MCP result: the model's text, and the
// structured value where the contract has one.
func toMCP(res *tool.Result) *mcp.CallToolResult {
	out := textResult(res.Text, res.IsError)
	if res.Structured != nil && (!res.IsError || res.Kind == tool.KindTimeout || res.Kind == tool.KindCancelled) {
		if _, isErrorMap := res.Structured.(map[string]string); !isErrorMap {
			out.StructuredContent = res.Structured
		}
	}
	return out
}

func textResult(text string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
}

// Shutdown stops the server's work: it drains (see Drain), every running
// call is cancelled (its process tree ended), every interactive session
// closed and every background job started by this server stopped, all at
// once, and Shutdown waits for the calls until ctx is done (jobs past ctx
// are killed).
func (s *Server) Shutdown(ctx context.Context) {
	s.Drain()
	s.cancel()
	// Jobs and interactive sessions end at the same time as the calls,
	// so that each has the whole of ctx's time.
	var others sync.WaitGroup
	others.Go(func() { s.h.Jobs.StopAll(ctx) })
	if s.h.Sessions != nil {
		others.Go(s.h.Sessions.Close)
	}
	done := make(chan struct{})
	go func() { s.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	// Sessions whose client never closed them (an HTTP client that went
	// away without DELETE) end here.
	for ss := range s.srv.Sessions() {
		ss.Close()
	}
	others.Wait()
}

// argsHash binds an approval to the exact arguments it was asked for.
func argsHash(args json.RawMessage) string {
	return hashHex(args)
}
