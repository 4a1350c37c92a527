package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// RefusalHeader carries the reason of a refusal in the proxy's HTTP
// response (curl -v and npm's verbose logs show it).
const RefusalHeader = "X-Agentexec-Refusal"

// writeRefusal answers an HTTP client with the status and a one-line body;
// the reason is also in the status line and RefusalHeader, because clients
// of a refused CONNECT show those rather than the body.
func writeRefusal(w io.Writer, status int, reason string) {
	reason = oneLine(reason)
	phrase := http.StatusText(status)
	fmt.Fprintf(w, "HTTP/1.1 %d %s (%s)\r\n%s: %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		status, phrase, shortReason(reason), RefusalHeader, reason, len(reason)+1, reason)
}

// oneLine keeps reason to one line of printable text.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// shortReason is the reason for the status line, within 200 bytes.
func shortReason(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// hopByHop are the headers that concern one connection only, never
// forwarded (besides those Connection names, and every Proxy-* header).
var hopByHop = []string{"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate"}

func stripHopByHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
	for name := range h {
		if strings.HasPrefix(name, "Proxy-") {
			delete(h, name)
		}
	}
}

// splitTarget reads "host:port" (CONNECT) or a URL's host and port, with
// def as the default port.
func splitTarget(hostport string, def int) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 || strings.Contains(strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), "]") {
			return "", 0, fmt.Errorf("%q is not HOST:PORT", hostport)
		}
		host, portStr = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), strconv.Itoa(def)
	}
	port, err := parsePort(portStr)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		return "", 0, errors.New("no host")
	}
	return host, port, nil
}

// readRequest reads one request head within the header cap.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	return http.ReadRequest(br)
}

// serveHTTP handles CONNECT and plain HTTP forwarding (one request per
// connection: the answer says Connection: close).
func (p *Proxy) serveHTTP(s *server, c net.Conn, br *bufio.Reader, lr *io.LimitedReader) {
	req, err := readRequest(br)
	if err != nil {
		if lr.N <= 0 {
			writeRefusal(c, http.StatusRequestHeaderFieldsTooLarge, prefix+"the request head is larger than the proxy accepts")
		} else if !errors.Is(err, io.EOF) {
			writeRefusal(c, http.StatusBadRequest, prefix+"malformed request: "+err.Error())
		}
		return
	}
	if req.Method == http.MethodConnect {
		host, port, err := splitTarget(req.RequestURI, 0)
		if err != nil {
			writeRefusal(c, http.StatusBadRequest, prefix+"CONNECT needs HOST:PORT: "+err.Error())
			return
		}
		up, ref := p.connect(s, "connect", host, port)
		if ref != nil {
			writeRefusal(c, ref.status, ref.reason)
			return
		}
		defer up.Close()
		defer s.track(up)()
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		c.SetDeadline(time.Time{})
		if n := br.Buffered(); n > 0 { // the client did not wait for the answer
			b, _ := br.Peek(n)
			if _, err := up.Write(b); err != nil {
				return
			}
		}
		p.relay(c, up)
		return
	}
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		writeRefusal(c, http.StatusBadRequest, prefix+"this is a proxy: send absolute http:// URLs, and CONNECT for https")
		return
	}
	host, port, err := splitTarget(req.URL.Host, 80)
	if err != nil {
		writeRefusal(c, http.StatusBadRequest, prefix+"bad host in the URL: "+err.Error())
		return
	}
	up, ref := p.connect(s, "http", host, port)
	if ref != nil {
		writeRefusal(c, ref.status, ref.reason)
		return
	}
	defer up.Close()
	defer s.track(up)()
	lr.N = math.MaxInt64 // the head was read within the cap; the body is not capped
	act := &activity{idle: orDefault(p.IdleTimeout, DefaultIdleTimeout)}
	act.touch()
	c.SetDeadline(time.Time{})
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return
		}
	}
	stripHopByHop(req.Header)
	req.RequestURI = ""
	req.Host = "" // the Host header is the URL's host, the one the rules checked
	req.Close = true
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = io.NopCloser(idleConn{readerConn{c, req.Body}, act})
	}
	if err := req.Write(idleWriter{up, act}); err != nil {
		writeRefusal(c, http.StatusBadGateway, prefix+"sending the request failed: "+unwrapDial(err).Error())
		return
	}
	ubr := bufio.NewReader(idleConn{up, act})
	resp, err := http.ReadResponse(ubr, req)
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(ubr, req) // interim answers are dropped
	}
	if err != nil {
		writeRefusal(c, http.StatusBadGateway, prefix+"reading the answer failed: "+unwrapDial(err).Error())
		return
	}
	defer resp.Body.Close()
	stripHopByHop(resp.Header)
	resp.Close = true
	resp.Write(idleWriter{c, act})
}

// idleWriter refreshes the write deadline from the shared activity.
type idleWriter struct {
	c net.Conn
	a *activity
}

func (w idleWriter) Write(b []byte) (int, error) {
	w.c.SetWriteDeadline(time.Now().Add(w.a.idle))
	n, err := w.c.Write(b)
	if n > 0 {
		w.a.touch()
	}
	return n, err
}

// readerConn reads from r (a request body over the client's connection)
// and sets deadlines on the connection, for idleConn.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }
