package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{"registry.npmjs.org", "registry.npmjs.org", ""},
		{"Registry.NPMJS.org.", "registry.npmjs.org", ""},
		{"example.com:443", "example.com:443", ""},
		{"*.example.com", "*.example.com", ""},
		{"*.example.com:8080", "*.example.com:8080", ""},
		{"*.co.uk", "*.co.uk", ""},
		{"10.0.0.5", "10.0.0.5", ""},
		{"10.0.0.5:3128", "10.0.0.5:3128", ""},
		{"[::1]:443", "[::1]:443", ""},
		{"::1", "::1", ""},
		{"[::ffff:127.0.0.1]", "127.0.0.1", ""},
		{"localhost", "localhost", ""},
		{"", "", "empty"},
		{"*", "", "every host"},
		{"*:443", "", "every host"},
		{"*.com", "", "top-level domain"},
		{"*.", "", "every host"},
		{"a.*.com", "", "first label"},
		{"**.example.com", "", "first label"},
		{"*example.com", "", "first label"},
		{"https://example.com", "", "not a URL"},
		{"example.com/path", "", "not a URL"},
		{"user@example.com", "", "not a URL"},
		{"example.com:0", "", "port"},
		{"example.com:65536", "", "port"},
		{"example.com:+80", "", "port"},
		{"example.com:http", "", "port"},
		{"exa mple.com", "", "not a URL"},
		{"a..b", "", "empty"},
		{"ex%ample.com", "", "holds"},
		{"[::1", "", "unclosed"},
		{"[zz]:80", "", "IPv6"},
		{"1:2:3", "", "neither"},
		{"*.1.2.3.4", "", ""}, // a name of digits: allowed as a name, never matches an address
		{strings.Repeat("a", 64) + ".com", "", "over-long"},
	} {
		r, err := ParseRule(c.in)
		switch {
		case c.err == "" && err != nil && c.in != "*.1.2.3.4":
			t.Errorf("ParseRule(%q): %v", c.in, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseRule(%q) = %v, %v; want an error with %q", c.in, r, err, c.err)
		case c.err == "" && err == nil && c.want != "" && r.Text != c.want:
			t.Errorf("ParseRule(%q).Text = %q, want %q", c.in, r.Text, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	rules, err := ParseRules(
		[]string{"example.com", "*.github.com", "api.test:8443", "10.1.2.3", "[2001:db8::1]:443", "*.corp.example"},
		[]string{"evil.github.com", "*.secret.corp.example", "example.com:25"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host string
		port int
		want Verdict
		rule string
	}{
		{"example.com", 443, Allowed, "example.com"},
		{"example.com", 25, Denied, "example.com:25"}, // deny wins
		{"www.example.com", 443, Unknown, ""},
		{"github.com", 443, Unknown, ""}, // *.x does not match x
		{"api.github.com", 443, Allowed, "*.github.com"},
		{"a.b.github.com", 22, Allowed, "*.github.com"},
		{"evil.github.com", 443, Denied, "evil.github.com"},
		{"notgithub.com", 443, Unknown, ""},
		{"xgithub.com", 443, Unknown, ""},
		{"api.test", 8443, Allowed, "api.test:8443"},
		{"api.test", 443, Unknown, ""},
		{"10.1.2.3", 80, Allowed, "10.1.2.3"},
		{"2001:db8::1", 443, Allowed, "[2001:db8::1]:443"},
		{"x.secret.corp.example", 443, Denied, "*.secret.corp.example"},
		{"secret.corp.example", 443, Allowed, "*.corp.example"},
		{"github.com.evil.net", 443, Unknown, ""},
	} {
		v, rule := rules.Decide(c.host, c.port)
		if v != c.want || rule != c.rule {
			t.Errorf("Decide(%s, %d) = %v %q, want %v %q", c.host, c.port, v, rule, c.want, c.rule)
		}
	}
	if _, err := ParseRules([]string{"*", "ok.example"}, []string{"*.org"}); err == nil || !strings.Contains(err.Error(), `"*"`) || !strings.Contains(err.Error(), `"*.org"`) {
		t.Errorf("ParseRules should report every bad rule: %v", err)
	}
}

func TestPublicRange(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
	}{
		{"93.184.216.34", true}, {"2606:2800:220:1:248:1893:25c8:1946", true}, {"8.8.8.8", true},
		{"127.0.0.1", false}, {"127.1.2.3", false}, {"::1", false}, {"10.0.0.1", false}, {"172.16.5.4", false},
		{"192.168.1.1", false}, {"169.254.169.254", false}, {"fe80::1", false}, {"fd00:ec2::254", false},
		{"224.0.0.1", false}, {"ff02::1", false}, {"0.0.0.0", false}, {"::", false}, {"100.64.0.1", false},
		{"::ffff:127.0.0.1", false}, {"::ffff:169.254.169.254", false}, {"255.255.255.255", false}, {"0.1.2.3", false},
		{"64:ff9b::7f00:1", false}, {"64:ff9b::808:808", true}, {"2002:7f00:1::", false}, {"198.18.0.1", false},
	} {
		if got := publicRange(netip.MustParseAddr(c.addr)); got != c.public {
			t.Errorf("publicRange(%s) = %v, want %v", c.addr, got, c.public)
		}
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com:443", "[::1]:80", "*", "*.com", "a.*.b", "1.2.3.4:5", "[::ffff:1.2.3.4]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		if r.Host == "" || r.Host == "*" || (r.Wildcard && !strings.Contains(r.Host, ".")) {
			t.Fatalf("ParseRule(%q) accepted %+v", s, r)
		}
		again, err := ParseRule(r.Text)
		if err != nil || again != r {
			t.Fatalf("ParseRule(%q) = %+v, but its text parses as %+v, %v", s, r, again, err)
		}
		if r.Wildcard && r.Match(r.Host, r.Port) {
			t.Fatalf("%q matches its own domain", r.Text)
		}
	})
}
