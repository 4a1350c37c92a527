//go:build linux

package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDecodeLine: every malformed line gets the answer JSON-RPC asks for.
func TestDecodeLine(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	deepObj := `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":` + deep + `}}`
	cases := []struct {
		name, line string
		code       int64 // 0: a message
		id         any
		blank      bool
	}{
		{"blank", "   \r", 0, nil, true},
		{"garbage", "hello there", jsonrpc.CodeParseError, nil, false},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"tools/li`, jsonrpc.CodeParseError, nil, false},
		{"bare number", "42", jsonrpc.CodeInvalidRequest, nil, false},
		{"bare string", `"x"`, jsonrpc.CodeInvalidRequest, nil, false},
		{"null", "null", jsonrpc.CodeInvalidRequest, nil, false},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, jsonrpc.CodeInvalidRequest, nil, false},
		{"empty batch", `[]`, jsonrpc.CodeInvalidRequest, nil, false},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":7,"method":"ping"}`, jsonrpc.CodeInvalidRequest, int64(7), false},
		{"no jsonrpc", `{"id":"a","method":"ping"}`, jsonrpc.CodeInvalidRequest, "a", false},
		{"object id", `{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, jsonrpc.CodeInvalidRequest, nil, false},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, jsonrpc.CodeInvalidRequest, nil, false},
		{"fraction id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, jsonrpc.CodeInvalidRequest, nil, false},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, jsonrpc.CodeInvalidRequest, nil, false},
		{"huge id", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`, jsonrpc.CodeInvalidRequest, nil, false},
		{"number method", `{"jsonrpc":"2.0","id":1,"method":5}`, jsonrpc.CodeInvalidRequest, int64(1), false},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, jsonrpc.CodeInvalidRequest, int64(1), false},
		{"string params", `{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, jsonrpc.CodeInvalidRequest, int64(1), false},
		{"nothing", `{"jsonrpc":"2.0"}`, jsonrpc.CodeInvalidRequest, nil, false},
		{"response without result", `{"jsonrpc":"2.0","id":3}`, jsonrpc.CodeInvalidRequest, int64(3), false},
		{"response with both", `{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1,"message":"x"}}`, jsonrpc.CodeInvalidRequest, int64(3), false},
		{"deep nesting", deep, jsonrpc.CodeParseError, nil, false},
		{"deep params", deepObj, jsonrpc.CodeParseError, nil, false},
		{"two values", `{"jsonrpc":"2.0","method":"x"} {}`, jsonrpc.CodeParseError, nil, false},
		{"bad utf8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", 0, nil, false},
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, nil, false},
		{"string id", `{"jsonrpc":"2.0","id":"abc","method":"ping","params":{}}`, 0, nil, false},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, nil, false},
		{"response", `{"jsonrpc":"2.0","id":9,"result":{}}`, 0, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg, le := decodeLine([]byte(c.line))
			switch {
			case c.blank:
				if msg != nil || le != nil {
					t.Fatalf("blank line: %v %v", msg, le)
				}
			case c.code == 0:
				if le != nil || msg == nil {
					t.Fatalf("want a message, got %+v", le)
				}
			default:
				if le == nil {
					t.Fatalf("want error %d, got message %v", c.code, msg)
				}
				if le.code != c.code || le.id != c.id {
					t.Fatalf("got code %d id %#v (%s), want %d id %#v", le.code, le.id, le.msg, c.code, c.id)
				}
			}
		})
	}
}

// TestLineReader: lines over the limit are reported by size and skipped,
// the lines around them kept.
func TestLineReader(t *testing.T) {
	in := "a\n" + strings.Repeat("x", 100) + "\nbb\n" + strings.Repeat("y", 10) + "\nlast"
	lr := &lineReader{r: bufio.NewReaderSize(strings.NewReader(in), 16), max: 10}
	type got struct {
		line    string
		tooLong int64
	}
	var all []got
	for {
		line, n, err := lr.next()
		if err != nil {
			break
		}
		all = append(all, got{string(line), n})
	}
	want := []got{{"a", 0}, {"", 101}, {"bb", 0}, {strings.Repeat("y", 10), 0}, {"last", 0}}
	if len(all) != len(want) {
		t.Fatalf("got %+v", all)
	}
	for i := range want {
		if all[i] != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, all[i], want[i])
		}
	}
}

// FuzzLineConn: whatever arrives on stdin, the reader never panics, every
// line is either a message for the SDK or answered with exactly one valid
// JSON-RPC error, and the lines after a bad one are still read.
func FuzzLineConn(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "garbage", "42", `{"jsonrpc":"1.0","id":1,"method":"x"}`,
		`{"jsonrpc":"2.0","id":{},"method":"x"}`, "[[[[[[[", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "\xff\xfe",
		`{"jsonrpc":"2.0","id":1,"result":{}}`, strings.Repeat("z", 300),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const sentinel = `{"jsonrpc":"2.0","method":"notifications/sentinel"}`
		input := append(append(bytes.Clone(data), '\n'), sentinel+"\n"...)
		var out bytes.Buffer
		c := newLineConn(io.NopCloser(bytes.NewReader(input)), &out, 256)
		defer c.Close()
		var msgs []jsonrpc.Message
		for {
			m, err := c.Read(t.Context())
			if err != nil {
				break
			}
			msgs = append(msgs, m)
		}
		if len(msgs) == 0 {
			t.Fatal("the line after the fuzzed input was lost")
		}
		if r, ok := msgs[len(msgs)-1].(*jsonrpc.Request); !ok || r.Method != "notifications/sentinel" {
			t.Fatalf("the last message is %#v, not the sentinel", msgs[len(msgs)-1])
		}
		answers := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte{'\n'}), []byte{'\n'})
		if out.Len() == 0 {
			answers = nil
		}
		lines := 0
		for _, l := range bytes.Split(input, []byte{'\n'}) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		if len(msgs)+len(answers) > lines {
			t.Fatalf("%d messages and %d answers for %d lines", len(msgs), len(answers), lines)
		}
		for _, a := range answers {
			var w wireError
			if err := json.Unmarshal(a, &w); err != nil || w.JSONRPC != "2.0" || w.Error.Code == 0 || !utf8.Valid(a) {
				t.Fatalf("bad answer %q: %v", a, err)
			}
		}
	})
}

// BenchmarkStdioRead: reading tools/call lines through agentexec's reader
// (validation, id tracking) beside the go-sdk's own stdio reader, the
// baseline.
func BenchmarkStdioRead(b *testing.B) {
	const line = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo hello world; ls -la /tmp"}}}` + "\n"
	input := func(n int) []byte {
		var buf bytes.Buffer
		for i := range n {
			fmt.Fprintf(&buf, line, i)
		}
		return buf.Bytes()
	}
	read := func(b *testing.B, conn interface {
		Read(context.Context) (jsonrpc.Message, error)
	}) {
		for i := 0; i < b.N; i++ {
			if _, err := conn.Read(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("sdk", func(b *testing.B) {
		c, _ := (&mcp.IOTransport{Reader: io.NopCloser(bytes.NewReader(input(b.N))), Writer: nopWriteCloser{io.Discard}}).Connect(context.Background())
		defer c.Close()
		b.ResetTimer()
		read(b, c)
	})
	b.Run("agentexec", func(b *testing.B) {
		c := newLineConn(io.NopCloser(bytes.NewReader(input(b.N))), io.Discard, 0)
		defer c.Close()
		b.ResetTimer()
		read(b, c)
	})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
