package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// events collects a proxy's audit events.
type events struct {
	mu  sync.Mutex
	all []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) last() Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.all) == 0 {
		return Event{}
	}
	return e.all[len(e.all)-1]
}

// startProxy serves a proxy for c on a loopback listener.
func startProxy(t testing.TB, c Config, adjust func(*Proxy)) (*Proxy, string, *events) {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	p.Audit = ev.add
	if adjust != nil {
		adjust(p)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Serve(ln)
	}()
	t.Cleanup(func() {
		p.Close()
		<-done
	})
	return p, ln.Addr().String(), ev
}

// upstream is an HTTP server on loopback that answers "hello from PATH".
func upstream(t testing.TB) (*httptest.Server, int) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" || r.Header.Get("Proxy-Connection") != "" || r.Header.Get("X-Hop") != "" {
			http.Error(w, "hop-by-hop header forwarded", 500)
			return
		}
		if r.URL.Path == "/host" {
			fmt.Fprint(w, r.Host)
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "hello from %s %s", r.URL.Path, body)
	}))
	t.Cleanup(srv.Close)
	return srv, srv.Listener.Addr().(*net.TCPAddr).Port
}

func client(proxy string) *http.Client {
	u, _ := url.Parse(proxy)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 20 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error(), ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get(RefusalHeader)
}

func TestHTTPForward(t *testing.T) {
	_, port := upstream(t)
	_, addr, ev := startProxy(t, Config{Allow: []string{"127.0.0.1:" + strconv.Itoa(port), "localhost"}, Deny: []string{"localhost:1"}, AllowPrivate: true}, nil)
	c := client("http://" + addr)
	if code, body, _ := get(t, c, fmt.Sprintf("http://127.0.0.1:%d/x?q=1", port)); code != 200 || body != "hello from /x " {
		t.Fatalf("allowed: %d %q", code, body)
	}
	if e := ev.last(); e.Decision != "allow" || e.Protocol != "http" || e.Host != "127.0.0.1" || e.Port != port || e.Rule != "127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("event %+v", e)
	}
	// The event never holds the path or query.
	if e := fmt.Sprintf("%+v", ev.last()); strings.Contains(e, "/x") || strings.Contains(e, "q=1") {
		t.Errorf("event leaks the path: %s", e)
	}
	// Hop-by-hop headers are stripped; a body goes through.
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://localhost:%d/post", port), strings.NewReader("data"))
	req.Header.Set("Proxy-Authorization", "Basic secret")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello from /post data" {
		t.Fatalf("post: %d %q", resp.StatusCode, b)
	}
	// The Host header is the URL's host, the one the rules checked (no
	// other virtual host of an allowed server).
	conn0, _ := net.Dial("tcp", addr)
	fmt.Fprintf(conn0, "GET http://127.0.0.1:%d/host HTTP/1.1\r\nHost: evil.example\r\n\r\n", port)
	if b, _ := io.ReadAll(conn0); !bytes.HasSuffix(b, []byte("\r\n\r\n127.0.0.1:"+strconv.Itoa(port))) {
		t.Errorf("Host header forwarded: %q", b)
	}
	conn0.Close()
	// Another port of an allowed address: refused with the reason.
	code, body, hdr := get(t, c, "http://127.0.0.1:1/")
	if code != 403 || !strings.Contains(body, "not on the sandbox's network allowlist") || !strings.Contains(hdr, "127.0.0.1:1") {
		t.Fatalf("unlisted port: %d %q %q", code, body, hdr)
	}
	if e := ev.last(); e.Decision != "deny" || e.Rule != "unknown" {
		t.Errorf("event %+v", e)
	}
	// Deny wins over allow.
	if code, body, _ := get(t, c, "http://localhost:1/"); code != 403 || !strings.Contains(body, `denied by the sandbox's network rule "localhost:1"`) {
		t.Fatalf("deny rule: %d %q", code, body)
	}
	// A relative URL is not proxied.
	conn, _ := net.Dial("tcp", addr)
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.Contains(line, "400") {
		t.Errorf("origin-form request: %q", line)
	}
}

func TestConnectTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls ok") }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	_, addr, ev := startProxy(t, Config{Allow: []string{"localhost:" + strconv.Itoa(port)}, AllowPrivate: true}, nil)
	c := client("http://" + addr)
	if code, body, _ := get(t, c, fmt.Sprintf("https://localhost:%d/", port)); code != 200 || body != "tls ok" {
		t.Fatalf("CONNECT: %d %q", code, body)
	}
	if e := ev.last(); e.Protocol != "connect" || e.Decision != "allow" || e.Host != "localhost" {
		t.Errorf("event %+v", e)
	}
	// A refused CONNECT says why in the status line, which clients show.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 403 || !strings.Contains(resp.Status, "example.org:443 is not on the sandbox's network allowlist") || resp.Header.Get(RefusalHeader) == "" {
		t.Fatalf("refused CONNECT: %q %v", resp.Status, resp.Header)
	}
}

func TestPrivateAddressesRefused(t *testing.T) {
	_, port := upstream(t)
	// localhost resolves to loopback: refused after resolution, even
	// though a rule allows the name.
	_, addr, ev := startProxy(t, Config{Allow: []string{"localhost", "127.0.0.1", "rebind.example", "meta.example"}}, func(p *Proxy) {
		p.Resolver = fakeResolver{"localhost": {"127.0.0.1", "::1"}, "rebind.example": {"93.184.216.34", "127.0.0.1"}, "meta.example": {"169.254.169.254", "::ffff:10.0.0.1"}}
	})
	c := client("http://" + addr)
	for _, u := range []string{fmt.Sprintf("http://localhost:%d/", port), fmt.Sprintf("http://127.0.0.1:%d/", port), "http://meta.example/latest/meta-data"} {
		code, body, _ := get(t, c, u)
		if code != 403 || !strings.Contains(body, "non-public address") || !strings.Contains(body, "allow_private") {
			t.Errorf("%s: %d %q", u, code, body)
		}
		if e := ev.last(); e.Rule != "private address" || e.Decision != "deny" {
			t.Errorf("%s: event %+v", u, e)
		}
	}
	// A name with a public and a private address: only the public one is
	// dialled (here it does not answer, which is the point: never the
	// loopback one).
	p2, err := New(Config{Allow: []string{"rebind.example"}})
	if err != nil {
		t.Fatal(err)
	}
	p2.Resolver = fakeResolver{"rebind.example": {"93.184.216.34", "127.0.0.1"}}
	addrs, _, ref := p2.admit(context.Background(), "rebind.example", port)
	if ref != nil || len(addrs) != 1 || addrs[0].String() != "93.184.216.34" {
		t.Errorf("admit kept %v, %+v", addrs, ref)
	}
}

type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range f[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	if out == nil {
		return nil, errors.New("no such host")
	}
	return out, nil
}

// socksDial opens a SOCKS5 CONNECT by hand: atyp 1, 3 or 4.
func socksDial(t *testing.T, proxy string, cmd, atyp byte, host string, port int) (net.Conn, byte) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	c.Write([]byte{5, 1, 0})
	var m [2]byte
	if _, err := io.ReadFull(c, m[:]); err != nil || m != [2]byte{5, 0} {
		t.Fatalf("method: %v %v", m, err)
	}
	req := []byte{5, cmd, 0, atyp}
	switch atyp {
	case 1:
		a := netip.MustParseAddr(host).As4()
		req = append(req, a[:]...)
	case 4:
		a := netip.MustParseAddr(host).As16()
		req = append(req, a[:]...)
	case 3:
		req = append(append(req, byte(len(host))), host...)
	}
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	c.Write(req)
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("reply: %v", err)
	}
	return c, rep[1]
}

func TestSOCKS5(t *testing.T) {
	_, port := upstream(t)
	_, addr, ev := startProxy(t, Config{Allow: []string{"localhost:" + strconv.Itoa(port), "127.0.0.1:" + strconv.Itoa(port)}, AllowPrivate: true}, nil)
	// Through Go's own SOCKS5 client (socks5h: the proxy resolves).
	if code, body, _ := get(t, client("socks5h://"+addr), fmt.Sprintf("http://localhost:%d/s", port)); code != 200 || body != "hello from /s " {
		t.Fatalf("socks5h: %d %q", code, body)
	}
	if e := ev.last(); e.Protocol != "socks5" || e.Decision != "allow" || e.Host != "localhost" {
		t.Errorf("event %+v", e)
	}
	for _, c := range []struct {
		name       string
		cmd, atyp  byte
		host       string
		port, want int
	}{
		{"ipv4", 1, 1, "127.0.0.1", port, socksOK},
		{"domain", 1, 3, "localhost", port, socksOK},
		{"ipv4 other port", 1, 1, "127.0.0.1", 1, socksNotAllowed},
		{"ipv6 unlisted", 1, 4, "::1", port, socksNotAllowed},
		{"bind", 2, 1, "127.0.0.1", port, socksCmdUnsupported},
		{"udp associate", 3, 1, "0.0.0.0", 0, socksCmdUnsupported},
		{"bad name", 1, 3, "bad name", 80, socksFailure},
	} {
		conn, code := socksDial(t, addr, c.cmd, c.atyp, c.host, c.port)
		if int(code) != c.want {
			t.Errorf("%s: reply %d, want %d", c.name, code, c.want)
		}
		if code == socksOK {
			fmt.Fprintf(conn, "GET /raw HTTP/1.0\r\nHost: x\r\n\r\n")
			b, _ := io.ReadAll(conn)
			if !bytes.Contains(b, []byte("hello from /raw")) {
				t.Errorf("%s: got %q", c.name, b)
			}
		}
		conn.Close()
	}
	// A client that offers only authentication is turned away.
	c, _ := net.Dial("tcp", addr)
	defer c.Close()
	c.Write([]byte{5, 1, 2})
	var m [2]byte
	io.ReadFull(c, m[:])
	if m != [2]byte{5, 0xff} {
		t.Errorf("auth-only greeting answered %v", m)
	}
}

func TestAsk(t *testing.T) {
	_, port := upstream(t)
	hp := "localhost:" + strconv.Itoa(port)
	var mu sync.Mutex
	answer, asked := Decline, 0
	block := make(chan struct{})
	_, addr, ev := startProxy(t, Config{OnUnknown: "ask", AllowPrivate: true}, func(p *Proxy) {
		p.AskTimeout = 2 * time.Second
		p.Ask = func(ctx context.Context, q Question) (Answer, error) {
			mu.Lock()
			asked++
			a := answer
			mu.Unlock()
			if q.Host != "localhost" || q.Port != port {
				return Decline, fmt.Errorf("asked about %v", q)
			}
			if a == Answer(99) {
				select {
				case <-block:
				case <-ctx.Done():
					return Decline, ctx.Err()
				}
			}
			return a, nil
		}
	})
	c := client("http://" + addr)
	u := "http://" + hp + "/"
	set := func(a Answer) {
		mu.Lock()
		answer = a
		mu.Unlock()
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return asked
	}
	if code, body, _ := get(t, c, u); code != 403 || !strings.Contains(body, "the user declined network access to "+hp) {
		t.Fatalf("declined: %d %q", code, body)
	}
	if e := ev.last(); e.Rule != "ask: declined" {
		t.Errorf("event %+v", e)
	}
	set(AllowOnce)
	if code, _, _ := get(t, c, u); code != 200 {
		t.Fatalf("allow once: %d", code)
	}
	if e := ev.last(); e.Rule != "ask: once" || e.Decision != "allow" {
		t.Errorf("event %+v", e)
	}
	set(Decline)
	if code, _, _ := get(t, c, u); code != 403 {
		t.Fatalf("once is once: %d", code)
	}
	set(AllowSession)
	get(t, c, u)
	n := count()
	set(Decline)
	if code, _, _ := get(t, c, u); code != 200 || count() != n {
		t.Fatalf("allowed for the session: %d, asked %d times (was %d)", code, count(), n)
	}
	// Nobody answers: the connection fails clearly when the time is up.
	set(Answer(99))
	if code, body, _ := get(t, c, "http://127.0.0.1:"+strconv.Itoa(port)+"/"); code != 403 || !strings.Contains(body, "nobody answered") {
		// 127.0.0.1 is a different host: asked afresh (and answered
		// with an error here, since the asker checks the host).
		if !strings.Contains(body, "asking failed") {
			t.Fatalf("other host: %d %q", code, body)
		}
	}
	p2, addr2, _ := startProxy(t, Config{OnUnknown: "ask", AllowPrivate: true}, func(p *Proxy) {
		p.AskTimeout = 200 * time.Millisecond
		p.Ask = func(ctx context.Context, q Question) (Answer, error) {
			<-ctx.Done()
			return Decline, ctx.Err()
		}
	})
	_ = p2
	if code, body, _ := get(t, client("http://"+addr2), u); code != 403 || !strings.Contains(body, "nobody answered the request to allow "+hp) {
		t.Fatalf("timeout: %d %q", code, body)
	}
	close(block)
}

func TestBounds(t *testing.T) {
	_, addr, _ := startProxy(t, Config{}, func(p *Proxy) { p.MaxHeaderBytes = 1024 })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 4096))
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(line, "431") {
		t.Errorf("oversized head: %q", line)
	}
	// A client that never finishes its head is dropped after the
	// handshake timeout.
	_, addr2, _ := startProxy(t, Config{}, func(p *Proxy) { p.HandshakeTimeout = 100 * time.Millisecond })
	c2, err := net.Dial("tcp", addr2)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.Write([]byte("GET http://exa"))
	c2.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(c2); err != nil {
		t.Errorf("slow head not dropped: %v", err)
	}
}

func TestMaxConns(t *testing.T) {
	p, addr, ev := startProxy(t, Config{}, func(p *Proxy) { p.MaxConns = 1 })
	_ = p
	hold, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	hold.Write([]byte{5}) // holds the one slot in the handshake
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if e := ev.last(); err == io.EOF && e.Rule == "max connections" {
			return
		}
	}
	t.Fatal("a connection over the limit was not refused")
}

// memConn is a net.Conn over a fixed input (fuzzing).
type memConn struct {
	r io.Reader
	w bytes.Buffer
}

func (m *memConn) Read(b []byte) (int, error)       { return m.r.Read(b) }
func (m *memConn) Write(b []byte) (int, error)      { return m.w.Write(b) }
func (m *memConn) Close() error                     { return nil }
func (m *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (m *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (m *memConn) SetDeadline(time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzHandshake feeds arbitrary bytes to the protocol detection, the HTTP
// request parser and the SOCKS5 parser of a proxy whose rules allow
// nothing: it must answer without panicking and never dial.
func FuzzHandshake(f *testing.F) {
	for _, s := range []string{
		"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"CONNECT example.com:443 HTTP/1.1\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
		"\x05\x01\x00\x05\x01\x00\x03\x0bexample.com\x01\xbb",
		"\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50",
		"\x05\x01\x00\x05\x03\x00\x04" + strings.Repeat("\x00", 18),
		"\x04\x01\x00\x50\x7f\x00\x00\x01\x00",
	} {
		f.Add([]byte(s))
	}
	p, err := New(Config{Deny: []string{"example.com"}})
	if err != nil {
		f.Fatal(err)
	}
	p.Resolver = fakeResolver{}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := &server{ctx: context.Background(), conns: map[net.Conn]bool{}}
		c := &memConn{r: bytes.NewReader(in)}
		p.handle(s, c)
		if len(s.conns) != 0 {
			t.Fatal("dialled")
		}
	})
}

func TestIdleTimeout(t *testing.T) {
	// The upstream sends one byte per tick for a while when asked ('s'),
	// and nothing otherwise.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				var op [1]byte
				if _, err := io.ReadFull(c, op[:]); err != nil || op[0] != 's' {
					io.Copy(io.Discard, c)
					return
				}
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for i := 0; i < 25; i++ {
					<-tick.C
					if _, err := c.Write([]byte{'x'}); err != nil {
						return
					}
				}
			}()
		}
	}()
	target := ln.Addr().String()
	_, addr, _ := startProxy(t, Config{Allow: []string{"127.0.0.1"}, AllowPrivate: true}, func(p *Proxy) { p.IdleTimeout = time.Second })
	tunnel := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", target)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		return c
	}
	// Idle both ways: closed after the idle timeout (bounded generously).
	c := tunnel()
	defer c.Close()
	c.Write([]byte{'q'})
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an idle tunnel was not closed: %v", err)
	}
	// Busy one way for longer than the idle timeout: not cut.
	c2 := tunnel()
	defer c2.Close()
	c2.Write([]byte{'s'})
	c2.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := io.ReadAll(c2)
	if len(b) != 25 {
		t.Fatalf("a busy tunnel was cut after %d bytes: %v", len(b), err)
	}
}
