package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults of the proxy's bounds.
const (
	DefaultMaxConns         = 256
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultHandshakeTimeout = 30 * time.Second
	DefaultDialTimeout      = 30 * time.Second
	DefaultAskTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes   = 64 << 10
)

// Config is what [sandbox.network] says of the allowlist.
type Config struct {
	// Allow and Deny are rules for ParseRule; a deny rule wins.
	Allow, Deny []string
	// AllowPrivate lets connections reach loopback, private, link-local
	// and other non-public addresses.
	AllowPrivate bool
	// OnUnknown is "deny" (the default) or "ask": what happens to a host
	// no rule names.
	OnUnknown string
}

// Answer is a person's answer to a Question.
type Answer int

// Answers.
const (
	Decline Answer = iota
	// AllowOnce lets this one connection through.
	AllowOnce
	// AllowSession lets every later connection to the host and port
	// through, for the life of the proxy.
	AllowSession
	// AllowRemembered lets this one connection through because the asker
	// holds an earlier "allow for the session" of the person it would ask
	// (an asker serving several people keeps such approvals per person);
	// the proxy remembers nothing, and audits it as a session approval.
	AllowRemembered
)

// Question asks whether a host no rule names may be reached.
type Question struct {
	Host string
	Port int
}

// Asker puts a Question to a person. It must return when ctx ends (the
// proxy's ask timeout); an error refuses the connection, with the error's
// text as the reason.
type Asker func(ctx context.Context, q Question) (Answer, error)

// Event is one decision, for the audit log: never a URL path or header.
type Event struct {
	// Protocol is "connect" (HTTP CONNECT), "http" (plain HTTP
	// forwarding) or "socks5".
	Protocol string
	Host     string
	Port     int
	// Decision is "allow" or "deny".
	Decision string
	// Rule is the rule that decided (as written), or "ask: once",
	// "ask: session", "ask: declined", "unknown" or "private address".
	Rule string
	// Reason says why a connection was refused or failed.
	Reason string
	// Addr is the address dialled (allowed connections).
	Addr string
}

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Proxy is the egress proxy. Create it with New, set the optional fields
// before the first connection, and Close it when done.
type Proxy struct {
	// Ask is asked about hosts no rule names when OnUnknown is "ask"; nil
	// refuses them.
	Ask Asker
	// Audit receives every decision; it must not block for long.
	Audit func(Event)
	// Bounds; zero means the Default* constant.
	MaxConns         int
	IdleTimeout      time.Duration
	HandshakeTimeout time.Duration
	DialTimeout      time.Duration
	AskTimeout       time.Duration
	MaxHeaderBytes   int
	// Resolver replaces net.DefaultResolver (tests).
	Resolver Resolver

	rules        *Rules
	allowPrivate bool
	ask          bool

	sem chan struct{}

	mu       sync.Mutex
	session  map[string]bool // host:port approved for the session
	inflight map[string]*pendingAsk
	servers  map[*server]bool
	closed   bool
	// hostMu serialises HostPort; hostPort is the listener on host
	// loopback, started on demand (0: none yet).
	hostMu   sync.Mutex
	hostPort int
	semOnce  sync.Once
}

// New checks c and returns a proxy for it.
func New(c Config) (*Proxy, error) {
	rules, err := ParseRules(c.Allow, c.Deny)
	if err != nil {
		return nil, err
	}
	p := &Proxy{rules: rules, allowPrivate: c.AllowPrivate, session: map[string]bool{}, inflight: map[string]*pendingAsk{}, servers: map[*server]bool{}}
	switch c.OnUnknown {
	case "", "deny":
	case "ask":
		p.ask = true
	default:
		return nil, fmt.Errorf("egress: on_unknown = %q: write \"deny\" or \"ask\"", c.OnUnknown)
	}
	return p, nil
}

// Rules returns the proxy's rules.
func (p *Proxy) Rules() *Rules { return p.rules }

func orDefault[T int | time.Duration](v, d T) T {
	if v > 0 {
		return v
	}
	return d
}

// ErrClosed is returned by HostPort and Serve after Close.
var ErrClosed = errors.New("egress: the proxy is closed")

// server is one listener and the connections it accepted.
type server struct {
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	conns   map[net.Conn]bool
	refused []string
}

// newServer registers a server for ln; with counted, its accept loop is
// counted in its wait group (the caller's goroutine calls Done).
func (p *Proxy) newServer(ln net.Listener, counted bool) (*server, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]bool{}}
	if counted {
		s.wg.Add(1)
	}
	p.servers[s] = true
	return s, nil
}

// Serve serves the connections ln accepts until ln is closed or the proxy
// is; it then closes their connections and returns once every one has
// ended.
func (p *Proxy) Serve(ln net.Listener) error {
	s, err := p.newServer(ln, false)
	if err != nil {
		ln.Close()
		return err
	}
	p.acceptLoop(s)
	p.stop(s)
	return nil
}

// ServeListener serves ln in the background (a sandboxed run's listener).
// stop closes ln and every connection it accepted, waits for them to end,
// and returns the reasons of the refusals meanwhile (each names its
// destination), for the run's result.
func (p *Proxy) ServeListener(ln net.Listener) (stop func() []string) {
	s, err := p.newServer(ln, false)
	if err != nil {
		ln.Close()
		return func() []string { return nil }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.acceptLoop(s)
	}()
	var once sync.Once
	return func() []string {
		once.Do(func() {
			p.stop(s)
			<-done
		})
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.refused
	}
}

// HostPort returns the port of the proxy's listener on 127.0.0.1 of the
// host, starting it on the first call (the sandbox's fallback without a
// network namespace).
func (p *Proxy) HostPort() (int, error) {
	p.hostMu.Lock()
	defer p.hostMu.Unlock()
	if p.hostPort != 0 {
		return p.hostPort, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("egress: cannot listen on host loopback: %w", err)
	}
	s, err := p.newServer(ln, true)
	if err != nil {
		ln.Close()
		return 0, err
	}
	go func() {
		defer s.wg.Done()
		p.acceptLoop(s)
	}()
	p.hostPort = ln.Addr().(*net.TCPAddr).Port
	return p.hostPort, nil
}

// Close stops every listener and connection and waits for them.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	servers := make([]*server, 0, len(p.servers))
	for s := range p.servers {
		servers = append(servers, s)
	}
	p.mu.Unlock()
	for _, s := range servers {
		p.stop(s)
	}
	return nil
}

// stop closes s's listener and connections and waits for its goroutines.
func (p *Proxy) stop(s *server) {
	s.cancel()
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	p.mu.Lock()
	delete(p.servers, s)
	p.mu.Unlock()
}

func (p *Proxy) acceptLoop(s *server) {
	p.semOnce.Do(func() { p.sem = make(chan struct{}, orDefault(p.MaxConns, DefaultMaxConns)) })
	backoff := time.Duration(0)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
				case <-s.ctx.Done():
					return
				}
				continue
			}
			return
		}
		backoff = 0
		select {
		case p.sem <- struct{}{}:
		default:
			// Full: refused at once rather than queued, so that a flood
			// cannot hold the proxy.
			c.Close()
			p.event(s, Event{Protocol: "tcp", Decision: "deny", Rule: "max connections", Reason: "too many connections through the proxy at once"})
			continue
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			c.Close()
			<-p.sem
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer func() {
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				<-p.sem
				s.wg.Done()
			}()
			p.handle(s, c)
		}()
	}
}

// track records a conn under s (an upstream connection), so that stop
// closes it; the returned func forgets it.
func (s *server) track(c net.Conn) func() {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		c.Close()
		return func() {}
	}
	s.conns[c] = true
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}
}

// handle tells the protocol by the first byte: 5 is SOCKS5, 4 SOCKS4
// (refused), anything else HTTP.
func (p *Proxy) handle(s *server, c net.Conn) {
	c.SetDeadline(time.Now().Add(orDefault(p.HandshakeTimeout, DefaultHandshakeTimeout)))
	lr := &io.LimitedReader{R: c, N: int64(orDefault(p.MaxHeaderBytes, DefaultMaxHeaderBytes))}
	br := bufio.NewReaderSize(lr, 4096)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	switch first[0] {
	case 5:
		p.serveSOCKS(s, c, br)
	case 4:
		c.Write([]byte{0, 0x5b, 0, 0, 0, 0, 0, 0}) // SOCKS4: request rejected
		p.event(s, Event{Protocol: "socks4", Decision: "deny", Rule: "protocol", Reason: "SOCKS4 is not supported; use SOCKS5 (socks5h://) or HTTP"})
	default:
		p.serveHTTP(s, c, br, lr)
	}
}

// refusal is why a destination was refused, in each protocol's terms.
type refusal struct {
	status int  // HTTP status
	socks  byte // SOCKS5 reply code
	rule   string
	reason string
}

const prefix = "agentexec egress: "

// pendingAsk is one question in flight, shared by the connections that
// wait for its answer.
type pendingAsk struct {
	done chan struct{}
	ans  Answer
	err  error
}

// admit decides whether host:port may be reached, asking a person when the
// configuration says so, and resolves it to the addresses to dial.
func (p *Proxy) admit(ctx context.Context, host string, port int) (addrs []netip.Addr, rule string, ref *refusal) {
	host = NormalizeHost(host)
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	ip, ipErr := netip.ParseAddr(host)
	if ipErr != nil {
		if err := checkName(host); err != nil {
			return nil, "", &refusal{400, 0x01, "invalid", prefix + "not a valid host name: " + err.Error()}
		}
	}
	if port < 1 || port > 65535 {
		return nil, "", &refusal{400, 0x01, "invalid", prefix + "port out of range"}
	}
	v, rule := p.rules.Decide(host, port)
	switch v {
	case Denied:
		return nil, rule, &refusal{403, 0x02, rule, fmt.Sprintf("%s%s is denied by the sandbox's network rule %q; do not retry it, use another host or ask the user", prefix, hp, rule)}
	case Unknown:
		p.mu.Lock()
		ok := p.session[hp]
		p.mu.Unlock()
		if ok {
			rule = "ask: session"
			break
		}
		if !p.ask || p.Ask == nil {
			return nil, "unknown", &refusal{403, 0x02, "unknown", fmt.Sprintf("%s%s is not on the sandbox's network allowlist; use an allowed host, or ask the user to allow it ([sandbox.network] allow, or --allow-host %s)", prefix, hp, hp)}
		}
		ans, err := p.askOnce(ctx, Question{Host: host, Port: port})
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return nil, "ask: timeout", &refusal{403, 0x02, "ask: timeout", fmt.Sprintf("%snobody answered the request to allow %s within %s; the connection was refused. Ask the user to allow it, then retry", prefix, hp, orDefault(p.AskTimeout, DefaultAskTimeout))}
		case err != nil:
			return nil, "ask: failed", &refusal{403, 0x02, "ask: failed", fmt.Sprintf("%s%s is not on the sandbox's network allowlist, and asking failed: %v", prefix, hp, err)}
		case ans == Decline:
			return nil, "ask: declined", &refusal{403, 0x02, "ask: declined", fmt.Sprintf("%sthe user declined network access to %s; do not retry it, ask the user how to proceed", prefix, hp)}
		case ans == AllowSession || ans == AllowRemembered:
			rule = "ask: session"
		default:
			rule = "ask: once"
		}
	}
	if ipErr == nil {
		addrs = []netip.Addr{ip.Unmap()}
	} else {
		var r Resolver = net.DefaultResolver
		if p.Resolver != nil {
			r = p.Resolver
		}
		rctx, cancel := context.WithTimeout(ctx, orDefault(p.DialTimeout, DefaultDialTimeout))
		res, err := r.LookupNetIP(rctx, "ip", host)
		cancel()
		if err != nil || len(res) == 0 {
			if err == nil {
				err = errors.New("no addresses")
			}
			return nil, rule, &refusal{502, 0x04, rule, fmt.Sprintf("%scannot resolve %s: %v", prefix, host, err)}
		}
		for _, a := range res {
			addrs = append(addrs, a.Unmap())
		}
	}
	if !p.allowPrivate {
		var public []netip.Addr
		for _, a := range addrs {
			if publicRange(a) {
				public = append(public, a)
			}
		}
		if len(public) == 0 {
			return nil, "private address", &refusal{403, 0x02, "private address", fmt.Sprintf("%s%s resolves to %s, a non-public address (loopback, private, link-local or reserved), which the sandbox may not reach unless allow_private = true", prefix, hp, addrs[0])}
		}
		addrs = public
	}
	return addrs, rule, nil
}

// askOnce asks about q, sharing one question among the connections that
// wait for the same host and port.
func (p *Proxy) askOnce(ctx context.Context, q Question) (Answer, error) {
	key := net.JoinHostPort(q.Host, strconv.Itoa(q.Port))
	p.mu.Lock()
	pa, waiting := p.inflight[key]
	if !waiting {
		pa = &pendingAsk{done: make(chan struct{})}
		p.inflight[key] = pa
	}
	p.mu.Unlock()
	if !waiting {
		actx, cancel := context.WithTimeout(ctx, orDefault(p.AskTimeout, DefaultAskTimeout))
		ans, err := p.Ask(actx, q)
		if errors.Is(actx.Err(), context.DeadlineExceeded) {
			ans, err = Decline, context.DeadlineExceeded // whatever the asker made of it
		}
		cancel()
		if err != nil {
			ans = Decline
		}
		pa.ans, pa.err = ans, err
		p.mu.Lock()
		delete(p.inflight, key)
		if ans == AllowSession && err == nil {
			p.session[key] = true
		}
		p.mu.Unlock()
		close(pa.done)
		return ans, err
	}
	select {
	case <-pa.done:
		return pa.ans, pa.err
	case <-ctx.Done():
		return Decline, ctx.Err()
	}
}

// connect admits and dials host:port; the event is sent for either
// outcome.
func (p *Proxy) connect(s *server, proto, host string, port int) (net.Conn, *refusal) {
	ctx := s.ctx
	addrs, rule, ref := p.admit(ctx, host, port)
	ev := Event{Protocol: proto, Host: NormalizeHost(host), Port: port, Rule: rule}
	if ref != nil {
		ev.Decision, ev.Rule, ev.Reason = "deny", ref.rule, ref.reason
		p.event(s, ev)
		return nil, ref
	}
	d := net.Dialer{Timeout: orDefault(p.DialTimeout, DefaultDialTimeout)}
	var err error
	for _, a := range addrs {
		var c net.Conn
		c, err = d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			ev.Decision, ev.Addr = "allow", c.RemoteAddr().String()
			p.event(s, ev)
			return c, nil
		}
	}
	code := byte(0x05)
	if !strings.Contains(err.Error(), "refused") {
		code = 0x04
	}
	ref = &refusal{502, code, rule, fmt.Sprintf("%scannot connect to %s: %v", prefix, net.JoinHostPort(ev.Host, strconv.Itoa(port)), unwrapDial(err))}
	ev.Decision, ev.Reason = "allow", ref.reason
	p.event(s, ev)
	return nil, ref
}

// unwrapDial drops the "dial tcp ADDR:" prefix of a dial error.
func unwrapDial(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

func (p *Proxy) event(s *server, e Event) {
	if e.Decision == "deny" && s != nil {
		s.mu.Lock()
		if len(s.refused) < 32 {
			s.refused = append(s.refused, strings.TrimPrefix(e.Reason, prefix))
		}
		s.mu.Unlock()
	}
	if p.Audit != nil {
		p.Audit(e)
	}
}

// activity is the last time either direction of a relay moved data.
type activity struct {
	last atomic.Int64
	idle time.Duration
}

func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

// idleConn ends a read only when neither direction moved data for the
// idle timeout.
type idleConn struct {
	net.Conn
	a *activity
}

func (c idleConn) Read(b []byte) (int, error) {
	for {
		c.Conn.SetReadDeadline(time.Now().Add(c.a.idle))
		n, err := c.Conn.Read(b)
		if n > 0 {
			c.a.touch()
		}
		var ne net.Error
		if n == 0 && errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, c.a.last.Load())) < c.a.idle {
			continue // the other direction is busy
		}
		return n, err
	}
}

// relay copies both ways until both are done or idle.
func (p *Proxy) relay(a, b net.Conn) {
	act := &activity{idle: orDefault(p.IdleTimeout, DefaultIdleTimeout)}
	act.touch()
	var wg sync.WaitGroup
	wg.Add(1)
	half := func(dst, src net.Conn) {
		err := copyIdle(dst, src, act)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			cw.CloseWrite()
		} else {
			dst.Close()
			src.Close()
		}
	}
	go func() {
		defer wg.Done()
		half(b, a)
	}()
	half(a, b)
	wg.Wait()
}

// spliceChunk is how much one splice(2) round moves before the idle
// deadline is renewed.
const spliceChunk = 256 << 10

// copyIdle copies src to dst until EOF (nil) or an error, ending only
// when neither direction moved data for the idle timeout. Between two TCP
// connections it moves the data with splice(2), in chunks, never through
// user space.
func copyIdle(dst, src net.Conn, act *activity) error {
	dt, ok1 := dst.(*net.TCPConn)
	st, ok2 := src.(*net.TCPConn)
	if !ok1 || !ok2 {
		_, err := io.CopyBuffer(struct{ io.Writer }{dst}, idleConn{src, act}, make([]byte, 64<<10))
		return err
	}
	lr := &io.LimitedReader{R: st}
	// A splice round returns at the end of its chunk or at the deadline:
	// half the idle timeout, so that the activity the other direction
	// checks is never older than that while data trickles.
	for {
		st.SetReadDeadline(time.Now().Add(act.idle / 2))
		dt.SetWriteDeadline(time.Now().Add(act.idle))
		lr.N = spliceChunk
		n, err := dt.ReadFrom(lr)
		if n > 0 {
			act.touch()
		}
		var ne net.Error
		switch {
		case err == nil && n == 0:
			return nil // EOF
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout() && (n > 0 || time.Since(time.Unix(0, act.last.Load())) < act.idle):
			// Still moving, here or the other way.
		default:
			return err
		}
	}
}
