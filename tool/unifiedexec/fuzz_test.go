package unifiedexec

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode feeds model input to both decoders and the shell line
// editor: no panic, clamps always hold, and the lines to check never miss
// text that a line end submits.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"cmd":"ls"}`, `{"cmd":"x","tty":true,"yield_time_ms":1e308}`, `{"session_id":"a","chars":"\u0003"}`,
		`{"session_id":"a","chars":"git push --fo","yield_time_ms":-0}`, `{"session_id":"a","max_output_tokens":1e20}`, `[]`, `{"cmd":"\u0000"}`} {
		f.Add([]byte(s), "rm -rf", "x\ny\r\u0004\u007f\t")
	}
	f.Fuzz(func(t *testing.T, raw []byte, pending, chars string) {
		if in, err := DecodeExec(raw); err == nil {
			if in.Yield < MinYield || in.Yield > MaxYield || in.MaxOutputTokens < 1 || strings.TrimSpace(in.Cmd) == "" {
				t.Fatalf("exec input out of its clamps: %+v", in)
			}
		}
		if in, err := DecodeWrite(raw); err == nil {
			lo, hi := MinYield, MaxYield
			if in.Chars == "" {
				lo, hi = MinPollYield, MaxPollYield
			}
			if in.Yield < lo || in.Yield > hi || in.SessionID == "" || len(in.Chars) > MaxChars {
				t.Fatalf("write input out of its clamps: %+v", in)
			}
		}
		if !utf8.ValidString(pending) || !utf8.ValidString(chars) || strings.ContainsAny(pending, "\r\n") {
			return // a pending line never holds a line end
		}
		lines, rest, bad := shellInput([]byte(pending), chars)
		if bad != "" {
			return
		}
		if strings.ContainsAny(string(rest), "\r\n") || (lines != "" && !strings.HasSuffix(lines, "\n")) {
			t.Fatalf("shellInput(%q, %q) = %q, %q", pending, chars, lines, rest)
		}
		// Every character typed after the last line end, with no erase
		// key, stays pending.
		tail := chars[strings.LastIndexAny(chars, "\r\n\x03\x04\x15")+1:]
		if !strings.ContainsAny(tail, "\x7f\x08\x0c\x1a\x1c") && !strings.HasSuffix(string(rest), tail) {
			t.Fatalf("shellInput(%q, %q) lost %q: rest %q", pending, chars, tail, rest)
		}
	})
}
