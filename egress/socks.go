package egress

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"time"
)

// SOCKS5 reply codes (RFC 1928).
const (
	socksOK              = 0x00
	socksFailure         = 0x01
	socksNotAllowed      = 0x02
	socksHostUnreachable = 0x04
	socksCmdUnsupported  = 0x07
	socksAddrUnsupported = 0x08
)

// socksRequest is a parsed SOCKS5 request.
type socksRequest struct {
	cmd  byte
	host string // a name, or an IP address
	port int
}

// readSOCKS reads the greeting and the request. It writes the method
// answer itself (no authentication, or 0xFF when the client offers
// none). A nil request with a non-zero code asks for that reply.
func readSOCKS(br *bufio.Reader, w io.Writer) (*socksRequest, byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, 0, err
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return nil, 0, err
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		w.Write([]byte{5, 0xff})
		return nil, 0, io.ErrUnexpectedEOF
	}
	if _, err := w.Write([]byte{5, 0}); err != nil {
		return nil, 0, err
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil {
		return nil, 0, err
	}
	if req[0] != 5 {
		return nil, socksFailure, nil
	}
	r := &socksRequest{cmd: req[1]}
	switch req[3] {
	case 1:
		var a [4]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return nil, 0, err
		}
		r.host = netip.AddrFrom4(a).String()
	case 4:
		var a [16]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return nil, 0, err
		}
		r.host = netip.AddrFrom16(a).Unmap().String()
	case 3:
		n, err := br.ReadByte()
		if err != nil {
			return nil, 0, err
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(br, name); err != nil {
			return nil, 0, err
		}
		r.host = string(name)
	default:
		return nil, socksAddrUnsupported, nil
	}
	var port [2]byte
	if _, err := io.ReadFull(br, port[:]); err != nil {
		return nil, 0, err
	}
	r.port = int(binary.BigEndian.Uint16(port[:]))
	return r, 0, nil
}

// socksReply writes a reply with the bound address (0.0.0.0:0 for
// failures).
func socksReply(w io.Writer, code byte, bound net.Addr) error {
	msg := []byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0}
	if ta, ok := bound.(*net.TCPAddr); ok && code == socksOK {
		if ap := ta.AddrPort(); ap.Addr().Unmap().Is4() {
			a := ap.Addr().Unmap().As4()
			copy(msg[4:8], a[:])
			binary.BigEndian.PutUint16(msg[8:], ap.Port())
		} else {
			a := ap.Addr().As16()
			msg = append([]byte{5, code, 0, 4}, a[:]...)
			msg = binary.BigEndian.AppendUint16(msg, ap.Port())
		}
	}
	_, err := w.Write(msg)
	return err
}

// serveSOCKS handles SOCKS5: no authentication, CONNECT only (BIND and UDP
// ASSOCIATE are refused), IPv4, IPv6 and domain addresses.
func (p *Proxy) serveSOCKS(s *server, c net.Conn, br *bufio.Reader) {
	req, code, err := readSOCKS(br, c)
	if err != nil {
		return
	}
	if req == nil {
		socksReply(c, code, nil)
		p.event(s, Event{Protocol: "socks5", Decision: "deny", Rule: "protocol", Reason: prefix + "unsupported SOCKS5 request"})
		return
	}
	if req.cmd != 1 {
		socksReply(c, socksCmdUnsupported, nil)
		p.event(s, Event{Protocol: "socks5", Host: NormalizeHost(req.host), Port: req.port, Decision: "deny", Rule: "protocol",
			Reason: prefix + "only SOCKS5 CONNECT is supported (no BIND, no UDP ASSOCIATE: UDP does not leave the sandbox)"})
		return
	}
	up, ref := p.connect(s, "socks5", req.host, req.port)
	if ref != nil {
		socksReply(c, ref.socks, nil)
		return
	}
	defer up.Close()
	defer s.track(up)()
	if err := socksReply(c, socksOK, nil); err != nil { // the host's address is none of the sandbox's business
		return
	}
	c.SetDeadline(time.Time{})
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	p.relay(c, up)
}
