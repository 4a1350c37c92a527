package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one client over stdin and stdout until it disconnects
// or ctx is done. The calls it started in the foreground are cancelled when
// it goes.
//
// A line that is not a JSON-RPC message is answered with a parse error
// (-32700) or an invalid request (-32600) and skipped; a line over
// Options.MaxLineBytes is answered and skipped without being buffered. A
// client that closes its end of stdout (even without closing stdin) ends
// the session and its calls: SIGPIPE is caught while serving, so that a
// write to a closed stdout is an error, not the end of agentexec.
func (s *Server) ServeStdio(ctx context.Context) error {
	stop := catchSIGPIPE()
	defer stop()
	return s.ServeIO(ctx, os.Stdin, os.Stdout)
}

// ServeIO is ServeStdio over the given streams. Where out is a pipe or a
// socket, the client closing its reading end is noticed even while no
// message is being written.
func (s *Server) ServeIO(ctx context.Context, in io.ReadCloser, out io.Writer) error {
	return s.ServeTransport(ctx, &lineTransport{in: in, out: out, max: s.o.MaxLineBytes, tagIDs: s.h.Registry.Observer != nil, hook: func(c *lineConn) {
		if f, ok := out.(*os.File); ok {
			go watchHangup(f, c.closed, c.hangup)
		}
	}})
}

// ServeTransport serves one client over t until it disconnects or ctx is
// done.
func (s *Server) ServeTransport(ctx context.Context, t mcp.Transport) error {
	w := &watchedTransport{inner: t, gone: make(chan struct{})}
	ss, err := s.srv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	se := s.sessionOf(ss)
	// The SDK waits for running handlers before it ends a session: cancel
	// them as soon as the client's side of the connection is gone.
	go func() {
		select {
		case <-w.gone:
			se.cancel()
		case <-se.ctx.Done():
		}
	}()
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		se.cancel()
		ss.Close()
		err = <-done
	}
	se.cancel()
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "closed")) {
		err = nil
	}
	return err
}

// HTTPOptions secure the HTTP handler.
type HTTPOptions struct {
	// Token, if set, must be given as "Authorization: Bearer <token>".
	Token string
	// Tokens are more accepted tokens (one per client, say). A session
	// is bound to the token that created it: its id presented with
	// another token is refused.
	Tokens []string
	// NoAuth serves without a token. ListenAndServe allows it only on
	// loopback and Unix sockets, and only when set explicitly; without
	// it, a TCP listener needs a token.
	NoAuth bool
	// MaxBodyBytes caps a request body; zero means 4 MiB.
	MaxBodyBytes int64
	// SessionTimeout closes idle sessions; zero means 30 minutes.
	SessionTimeout time.Duration
}

// tokens returns every accepted token.
func (o *HTTPOptions) tokens() []string {
	var out []string
	if o.Token != "" {
		out = append(out, o.Token)
	}
	for _, t := range o.Tokens {
		if t != "" {
			out = append(out, t)
		}
	}
	return out
}

// Handler returns the streamable HTTP handler: MCP at / (and /mcp), and
// for orchestrators, without a token (they reveal nothing): GET /livez
// (200 while the process serves HTTP at all), GET /readyz (200 while it
// takes calls; 503 with the reason once it drains or shuts down, or when
// the audit log fails and audit.fail_closed refuses every call) and GET
// /healthz (the same as /readyz, kept for older setups). While the server
// drains (see Drain), every MCP request is refused with 503 and a reason. The SDK's DNS
// rebinding protection stays on; beside it, requests with an absolute-form
// URI (whose Host header Go would drop) and cross-origin browser requests
// (an Origin that is not this server) are refused, as are Unix-socket
// peers of another user.
func (s *Server) Handler(o HTTPOptions) http.Handler {
	tokens := o.tokens()
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{SessionTimeout: o.SessionTimeout, Logger: s.o.Logger})
	statelessHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: s.o.Logger})
	observed := s.h.Registry.Observer != nil
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
			http.Error(w, "agentexec is shutting down (it got SIGTERM): it takes no new requests, and the commands it runs are being ended; "+
				"send this request to another agentexec server, or retry when this one is back", http.StatusServiceUnavailable)
			return
		}
		if msg := checkRequestShape(r); msg != "" {
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		peer, hasPeer := peerUID(r.Context())
		if hasPeer && peer != os.Getuid() && peer != 0 {
			http.Error(w, fmt.Sprintf("this agentexec server serves only uid %d on its socket", os.Getuid()), http.StatusForbidden)
			return
		}
		cred, ok := credential(r, tokens)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentexec"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		if hasPeer {
			cred += fmt.Sprintf("/uid-%d", peer)
		}
		sid := r.Header.Get("Mcp-Session-Id")
		if sid != "" && !s.binds.check(s.sessionKey(sid), cred) {
			http.Error(w, "this session was created by another client (another token); start a session of your own", http.StatusForbidden)
			return
		}
		if r.ContentLength > o.MaxBodyBytes {
			http.Error(w, fmt.Sprintf("request body over %d bytes", o.MaxBodyBytes), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, o.MaxBodyBytes)
		if observed && r.Method == http.MethodPost {
			peekRPCID(r)
		}
		// The tool handler learns the credential from here (a client's
		// own value is replaced).
		r.Header.Set(credentialHeader, cred)
		if IsStateless(r.Header.Get("Mcp-Protocol-Version")) {
			// Protocol 2026-07-28 and later: no session, each request on
			// its own; conversations are kept by handles (see Handle).
			if r.Method == http.MethodPost {
				id, done := s.trackRequest(r.Context())
				defer done()
				r.Header.Set(requestHeader, id)
			}
			statelessHandler.ServeHTTP(w, r)
			return
		}
		switch r.Method {
		case http.MethodPost:
			if sid == "" {
				// A new session: counted and created one at a time, so
				// that concurrent clients cannot pass the limit together.
				s.newSession.Lock()
				defer s.newSession.Unlock()
				if s.sessionCount() >= s.o.MaxSessions {
					w.Header().Set("Retry-After", "10")
					http.Error(w, fmt.Sprintf("too many sessions: this agentexec server already serves %d (server.max_sessions); end one (DELETE) or wait until an idle one expires", s.o.MaxSessions), http.StatusServiceUnavailable)
					return
				}
				w = &recorder{ResponseWriter: w, onHeader: func(h http.Header) {
					if id := h.Get("Mcp-Session-Id"); id != "" {
						s.binds.bind(s.sessionKey(id), cred)
						s.pruneBindings()
					}
				}}
			}
			// The SDK keeps a call running when the request that carried
			// it goes (a client may resume a stream), but this server
			// keeps no events to resume from: a call whose request is gone
			// can never deliver its result, so it is ended.
			id, done := s.trackRequest(r.Context())
			defer done()
			r.Header.Set(requestHeader, id)
		case http.MethodDelete:
			// The SDK closes a deleted session only after its calls end.
			s.endSession(sid)
			defer s.binds.forget(s.sessionKey(sid))
		}
		mcpHandler.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) {
		if err := s.Health(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok\n")
	}
	mux.HandleFunc("GET /healthz", health)
	mux.HandleFunc("GET /readyz", health)
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok\n")
	})
	mux.Handle("/", guarded)
	return mux
}

// FirstStatelessVersion is the first MCP revision without sessions.
const FirstStatelessVersion = "2026-07-28"

// IsStateless reports whether a request's MCP-Protocol-Version is a
// revision without sessions (dates compare as strings).
func IsStateless(version string) bool { return version >= FirstStatelessVersion }

// checkRequestShape refuses what browsers and proxies could smuggle: an
// absolute-form request URI (Go replaces the Host header with its host,
// so the Host check would see the URI's), and a cross-origin request (an
// Origin header naming another site than the Host). It returns why, or "".
func checkRequestShape(r *http.Request) string {
	if r.RequestURI != "" && !strings.HasPrefix(r.RequestURI, "/") {
		return "absolute-form request URIs are refused; send the path only (this is not a proxy)"
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Sprintf("cross-origin request refused: Origin %q is not this server", shortenText(origin, 100))
		}
	}
	return ""
}

func shortenText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// pruneBindings forgets the bindings of sessions that have ended.
func (s *Server) pruneBindings() {
	live := map[string]bool{}
	for ss := range s.srv.Sessions() {
		live[s.sessionKey(ss.ID())] = true
	}
	s.binds.prune(func(k string) bool { return live[k] })
}

// sessionCount is the number of sessions the SDK holds open.
func (s *Server) sessionCount() int {
	n := 0
	for range s.srv.Sessions() {
		n++
	}
	return n
}

// IsLoopback reports whether a listen address binds only to loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Errors of ListenAndServe's checks.
var (
	// ErrTokenRequired: a TCP listener without a token and without an
	// explicit NoAuth.
	ErrTokenRequired = errors.New("mcpserver: serving over TCP needs a bearer token (--token-file or $AGENTEXEC_TOKEN; `agentexec serve` generates one when none is given), or an explicit --no-auth on loopback")
	// ErrNoAuthBeyondLoopback: NoAuth on an address other processes or
	// machines reach.
	ErrNoAuthBeyondLoopback = errors.New("mcpserver: --no-auth is refused on an address beyond loopback: anyone who reaches it could run commands as this user; give a token")
)

// IsUnix reports whether addr names a Unix socket ("unix:PATH").
func IsUnix(addr string) bool { return strings.HasPrefix(addr, "unix:") }

// ListenAndServe serves HTTP on addr ("host:port", or "unix:PATH" for a
// Unix socket created with mode 0600) until ctx is done, then drains and
// shuts down within grace: /readyz answers 503 and new requests are
// refused with a reason at once, running calls are cancelled (their
// process trees ended), interactive sessions closed and background jobs
// stopped, and then the listener closes. A TCP address needs a token of at least MinTokenBits, unless
// o.NoAuth is set and the address is loopback.
func (s *Server) ListenAndServe(ctx context.Context, addr string, o HTTPOptions, grace time.Duration, ready func(net.Addr)) error {
	tokens := o.tokens()
	switch {
	case len(tokens) == 0 && o.NoAuth && !IsUnix(addr) && !IsLoopback(addr):
		return ErrNoAuthBeyondLoopback
	case len(tokens) == 0 && !o.NoAuth && !IsUnix(addr):
		return ErrTokenRequired
	}
	for _, t := range tokens {
		if err := CheckToken(t); err != nil {
			return err
		}
	}
	ln, err := listen(addr)
	if err != nil {
		return fmt.Errorf("mcpserver: %w", err)
	}
	if IsUnix(addr) {
		defer os.Remove(strings.TrimPrefix(addr, "unix:"))
	}
	hs := &http.Server{Handler: s.Handler(o), ReadHeaderTimeout: 10 * time.Second, ConnContext: withPeer}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Draining: the listener stays open, so that probes see /readyz turn
	// 503 and clients get a reason, while every call, session and job is
	// ended within grace.
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	s.Drain()
	s.Shutdown(sctx) // calls end first, so that their streams can close
	// What is left of grace lets the last responses go out.
	hs.Shutdown(sctx)
	hs.Close()
	<-errc
	return nil
}

// watchedTransport reports when its connection stops delivering messages
// (the client closed it, or it broke).
type watchedTransport struct {
	inner mcp.Transport
	gone  chan struct{}
	once  sync.Once
}

func (w *watchedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := w.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &watchedConn{Connection: c, w: w}, nil
}

type watchedConn struct {
	mcp.Connection
	w *watchedTransport
}

func (c *watchedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err != nil {
		c.w.once.Do(func() { close(c.w.gone) })
	}
	return m, err
}

func (c *watchedConn) Close() error {
	c.w.once.Do(func() { close(c.w.gone) })
	return c.Connection.Close()
}
