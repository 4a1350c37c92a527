// Package egress is the sandbox's way out to the network: a small proxy
// (HTTP CONNECT, plain HTTP forwarding and SOCKS5 on one port, the
// protocol told by the first byte) that lets a connection through only to
// hosts an allowlist names. Names are resolved by the proxy, and the
// resolved addresses are checked (loopback, private, link-local including
// the cloud metadata address, multicast and unspecified addresses are
// refused unless AllowPrivate) and then dialled as checked, never
// resolved again, so DNS rebinding cannot reach them. Every decision is
// reported as an Event (host, port, decision, rule; never a path or a
// header).
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one allow or deny entry: an exact host, or "*.example.com"
// (every subdomain of example.com, not example.com itself), with an
// optional port.
type Rule struct {
	// Host is the lower-case host without a trailing dot; for a wildcard,
	// the suffix after "*." (example.com). An IPv6 address is written
	// without brackets.
	Host string
	// Wildcard says Host matches its subdomains only.
	Wildcard bool
	// Port is the only port matched; 0 matches every port.
	Port int
	// Text is the rule as written (normalised), for audit events.
	Text string
}

// RuleError says why a rule was refused at configuration time.
type RuleError struct {
	Rule string
	Msg  string
}

// Error returns "egress rule "R": MSG".
func (e *RuleError) Error() string { return fmt.Sprintf("egress rule %q: %s", e.Rule, e.Msg) }

// ParseRule reads "host", "host:port", "*.domain", "*.domain:port",
// "1.2.3.4[:port]" or "[v6][:port]". It refuses "*", a wildcard over a
// single label ("*.com"), wildcards anywhere but the first label, empty
// labels and ports outside 1-65535.
func ParseRule(s string) (Rule, error) {
	in := s
	bad := func(format string, a ...any) (Rule, error) {
		return Rule{}, &RuleError{Rule: in, Msg: fmt.Sprintf(format, a...)}
	}
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return bad("empty; write a host name such as registry.npmjs.org, optionally with :PORT")
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@ \t") {
		return bad("write a host name, optionally with :PORT, not a URL")
	}
	host, port := s, 0
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return bad("unclosed [ of an IPv6 address")
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return bad("unexpected %q after the IPv6 address", rest)
			}
			n, err := parsePort(p)
			if err != nil {
				return bad("%v", err)
			}
			port = n
		}
		if _, err := netip.ParseAddr(host); err != nil {
			return bad("%q is not an IPv6 address", host)
		}
	} else if strings.Count(s, ":") == 1 {
		h, p, _ := strings.Cut(s, ":")
		n, err := parsePort(p)
		if err != nil {
			return bad("%v", err)
		}
		host, port = h, n
	} else if strings.Count(s, ":") > 1 {
		if _, err := netip.ParseAddr(s); err != nil {
			return bad("%q is neither a host name nor an IP address (write an IPv6 address with a port as [ADDR]:PORT)", s)
		}
	}
	host = strings.TrimSuffix(host, ".")
	r := Rule{Port: port}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		if !strings.Contains(rest, ".") {
			return bad("a wildcard over a whole top-level domain allows too much; name the domain, as in *.example.%s", rest)
		}
		r.Wildcard, host = true, rest
	}
	if host == "*" || host == "" {
		return bad("\"*\" would allow every host, which network = \"allowlist\" exists to prevent; use network mode \"on\" instead, or list the hosts")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if r.Wildcard {
			return bad("a wildcard cannot precede an IP address")
		}
		host = a.Unmap().String()
	} else if err := checkName(host); err != nil {
		return bad("%v", err)
	}
	r.Host = host
	r.Text = r.String()
	return r, nil
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strings.HasPrefix(p, "+") {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return n, nil
}

// checkName checks a host name's labels: letters, digits, '-' and '_',
// 1 to 63 bytes each, 253 in all.
func checkName(h string) error {
	if len(h) > 253 {
		return errors.New("the host name is longer than 253 bytes")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q has an empty or over-long label", h)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if c == '*' {
				return fmt.Errorf("a wildcard may only be the first label, as in *.example.com")
			}
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q holds %q, which a host name cannot", h, string(c))
			}
		}
	}
	return nil
}

// String writes the rule back: "*.example.com:443", "[::1]:8080".
func (r Rule) String() string {
	h := r.Host
	if r.Wildcard {
		h = "*." + h
	}
	if r.Port == 0 {
		return h
	}
	return net.JoinHostPort(h, strconv.Itoa(r.Port))
}

// Match says whether r covers host (normalised with NormalizeHost) and
// port.
func (r Rule) Match(host string, port int) bool {
	if r.Port != 0 && r.Port != port {
		return false
	}
	if r.Wildcard {
		return len(host) > len(r.Host)+1 && strings.HasSuffix(host, r.Host) && host[len(host)-len(r.Host)-1] == '.'
	}
	return host == r.Host
}

// NormalizeHost lower-cases host, removes brackets and one trailing dot,
// and writes an IP address in its canonical form (an IPv4-mapped IPv6
// address as IPv4).
func NormalizeHost(host string) string {
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(host, "]"), "["), "."))
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String()
	}
	return host
}

// Rules are the allow and deny lists; deny wins.
type Rules struct {
	Allow, Deny []Rule
}

// ParseRules parses both lists, reporting every bad rule.
func ParseRules(allow, deny []string) (*Rules, error) {
	r := &Rules{}
	var errs []error
	for _, s := range allow {
		if x, err := ParseRule(s); err != nil {
			errs = append(errs, err)
		} else {
			r.Allow = append(r.Allow, x)
		}
	}
	for _, s := range deny {
		if x, err := ParseRule(s); err != nil {
			errs = append(errs, err)
		} else {
			r.Deny = append(r.Deny, x)
		}
	}
	return r, errors.Join(errs...)
}

// Verdict is what the rules say of a destination.
type Verdict int

// Verdicts.
const (
	// Unknown: no rule names the destination.
	Unknown Verdict = iota
	Allowed
	Denied
)

// Decide returns the verdict for host (as NormalizeHost writes it) and
// port, and the rule behind it: a deny rule wins over an allow rule.
func (r *Rules) Decide(host string, port int) (Verdict, string) {
	if r == nil {
		return Unknown, ""
	}
	for _, x := range r.Deny {
		if x.Match(host, port) {
			return Denied, x.Text
		}
	}
	for _, x := range r.Allow {
		if x.Match(host, port) {
			return Allowed, x.Text
		}
	}
	return Unknown, ""
}

// publicRange reports whether a may be dialled without AllowPrivate: not
// loopback, private (RFC 1918, fc00::/7), link-local (169.254/16 with the
// metadata address, fe80::/10), multicast, unspecified, shared (CGNAT
// 100.64/10), benchmarking, reserved, broadcast or 0/8.
func publicRange(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	if nat64.Contains(a) { // NAT64 reaches the embedded IPv4 address
		b := a.As16()
		return publicRange(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	return true
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "240.0.0.0/4", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "::/128", "2002::/16"} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()
