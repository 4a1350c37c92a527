//go:build linux

package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/internal/proctest"
)

// TestProbes: /livez, /readyz and /healthz answer without a token; once
// the server drains, /readyz and /healthz say 503 with the reason while
// /livez stays 200, and an MCP request, even with the right token, is
// refused with 503 and a reason.
func TestProbes(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	url := serveHTTP(t, s, HTTPOptions{Token: testToken})
	get := func(path string) (int, string) {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/livez", "/readyz", "/healthz"} {
		if code, body := get(p); code != http.StatusOK || body != "ok\n" {
			t.Errorf("%s: %d %q", p, code, body)
		}
	}
	s.Drain()
	for _, p := range []string{"/readyz", "/healthz"} {
		if code, body := get(p); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
			t.Errorf("%s while draining: %d %q", p, code, body)
		}
	}
	if code, _ := get("/livez"); code != http.StatusOK {
		t.Errorf("/livez while draining: %d", code)
	}
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "another agentexec server") {
		t.Errorf("a request while draining: %d %q", resp.StatusCode, b)
	}
}

func TestTagRPCID(t *testing.T) {
	cases := []struct{ params, want string }{
		{``, `{"_meta":{"io.agentexec/jsonrpc-id":"7"}}`},
		{`{"name":"bash"}`, `{"_meta":{"io.agentexec/jsonrpc-id":"7"},"name":"bash"}`},
		{`{"_meta":{"traceparent":"x","io.agentexec/jsonrpc-id":"forged"}}`, `{"_meta":{"io.agentexec/jsonrpc-id":"7","traceparent":"x"}}`},
		{`[1,2]`, `[1,2]`},
		{`{"_meta":3}`, `{"_meta":3}`},
		{`null`, `null`},
		{`{bad`, `{bad`},
	}
	for _, c := range cases {
		if got := string(tagRPCID(json.RawMessage(c.params), "7")); got != c.want {
			t.Errorf("%s: %s, want %s", c.params, got, c.want)
		}
	}
}

// FuzzTagRPCID: whatever params a client sends, tagging either returns
// them unchanged or returns a JSON object whose _meta holds exactly the
// server's id, with every other member kept.
func FuzzTagRPCID(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"name":"bash","_meta":{"a":1}}`, `[]`, `{"_meta":null}`, `{"_meta":{"io.agentexec/jsonrpc-id":1}}`, `"x"`, `{"a":{"b":[1,{"c":2}]}}`} {
		f.Add(s, "7")
	}
	f.Fuzz(func(t *testing.T, params, id string) {
		out := tagRPCID(json.RawMessage(params), id)
		if bytes.Equal(out, []byte(params)) {
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(out, &obj); err != nil {
			t.Fatalf("%q became %q, not an object: %v", params, out, err)
		}
		var meta map[string]any
		if err := json.Unmarshal(obj["_meta"], &meta); err != nil {
			t.Fatalf("%q: _meta %q: %v", params, obj["_meta"], err)
		}
		var want string // the id as JSON carries it (invalid UTF-8 replaced)
		b, _ := json.Marshal(id)
		json.Unmarshal(b, &want)
		if got, _ := meta[metaRPCID].(string); got != want {
			t.Fatalf("%q: id %q, want %q", params, got, id)
		}
		var in map[string]json.RawMessage
		if len(bytes.TrimSpace([]byte(params))) > 0 {
			if err := json.Unmarshal([]byte(params), &in); err != nil {
				t.Fatalf("%q is not an object but was changed to %q", params, out)
			}
		}
		for k := range in {
			if _, ok := obj[k]; !ok {
				t.Fatalf("%q lost member %q: %q", params, k, out)
			}
		}
	})
}
