package tool

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	cases := []struct {
		name, in string
		err      string // substring; "" means no error
	}{
		{"empty input", ``, ""},
		{"empty object", `{}`, ""},
		{"fields", `{"a":"x","b":[1]}`, ""},
		{"not JSON", `{"a":`, "not valid JSON"},
		{"array", `["a"]`, "must be a JSON object, not an array"},
		{"string", `"a"`, "must be a JSON object, not a string"},
		{"null", `null`, "must be a JSON object, not null"},
		{"number", `42`, "must be a JSON object, not a number"},
		{"duplicate", `{"a":"x","a":"y"}`, "a: is given more than once"},
		{"unknown", `{"a":"x","zzz":1}`, "zzz: is not a known field; the accepted fields are a, b"},
		{"trailing data", `{"a":"x"} {"a":"y"}`, "data after the JSON object"},
		{"trailing garbage", `{"a":"x"} x`, "data after the JSON object"},
		{"invalid UTF-8 value", "{\"a\":\"\xff\"}", "a: is not valid UTF-8"},
		{"invalid UTF-8 key", "{\"\xff\":1}", "not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseArgs(json.RawMessage(c.in), "a", "b")
			if c.err == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
		})
	}
}

func TestGetters(t *testing.T) {
	a, err := ParseArgs(json.RawMessage(`{"s":"x","n":null,"num":"2.5","l":["a",1],"m":{"K":"v","L":null},"b":true,"big":1e400,"neg":-3}`),
		"s", "n", "num", "l", "m", "b", "big", "neg")
	if err != nil {
		t.Fatal(err)
	}
	if s, ok, err := a.String("s"); s != "x" || !ok || err != nil {
		t.Errorf("String(s) = %q %v %v", s, ok, err)
	}
	if _, ok, err := a.String("n"); ok || err != nil {
		t.Errorf("null should be absent: %v %v", ok, err)
	}
	if _, _, err := a.String("b"); err == nil || err.Error() != "b: must be a string, not a boolean" {
		t.Errorf("String(b): %v", err)
	}
	if _, _, err := a.StringList("l"); err == nil || err.Error() != "l[1]: must be a string, not a number" {
		t.Errorf("StringList: %v", err)
	}
	if _, _, _, err := a.StringMap("m"); err == nil || err.Error() != "m.L: must be a string, not null" {
		t.Errorf("StringMap: %v", err)
	}
	if f, ok, err := a.Number("num", NumberRule{Strings: true, Fractions: true}); f != 2.5 || !ok || err != nil {
		t.Errorf("lenient Number = %v %v %v", f, ok, err)
	}
	if _, _, err := a.Number("num", NumberRule{}); err == nil || !strings.Contains(err.Error(), "not a string") {
		t.Errorf("strict Number(string): %v", err)
	}
	if _, _, err := a.Number("big", NumberRule{}); err == nil || !strings.Contains(err.Error(), "within range") {
		t.Errorf("Number(1e400): %v", err)
	}
	if f, _, err := a.Number("neg", NumberRule{}); f != -3 || err != nil {
		t.Errorf("Number(-3) = %v %v", f, err)
	}
	if _, _, err := a.Number("b", NumberRule{Strings: true}); err == nil || !strings.Contains(err.Error(), "not a boolean") {
		t.Errorf("Number(bool): %v", err)
	}
	for _, s := range []string{`"abc"`, `"0x10"`, `"inf"`, `"NaN"`, `""`, `"1_000"`} {
		a, _ := ParseArgs(json.RawMessage(`{"x":`+s+`}`), "x")
		if _, _, err := a.Number("x", NumberRule{Strings: true, Fractions: true}); err == nil {
			t.Errorf("Number(%s) accepted", s)
		}
	}
}

func TestCheckArgString(t *testing.T) {
	if err := CheckArgString("command", "a\x00b"); err == nil || !strings.Contains(err.Error(), "NUL byte (at byte 1)") {
		t.Errorf("NUL: %v", err)
	}
	if err := CheckArgString("command", strings.Repeat("x", MaxArgBytes+1)); err == nil || !strings.HasPrefix(err.Error(), "command: is 131072 bytes") {
		t.Errorf("long: %v", err)
	}
	if err := CheckArgString("command", strings.Repeat("x", MaxArgBytes)); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

// FuzzParseArgs checks that no input makes the decoder or its getters
// panic, and that accepted input is a JSON object with known keys.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"x"}`, `{"a":[1,"2"]}`, `{"b":{"k":"v"}}`, `{"a":1e999}`, `[`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := ParseArgs(raw, "a", "b")
		if err != nil {
			if _, ok := err.(*ValidationError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		for _, k := range []string{"a", "b"} {
			a.String(k)
			a.StringList(k)
			a.StringMap(k)
			a.Number(k, NumberRule{Strings: true, Fractions: true})
		}
		if trimmed := strings.TrimSpace(string(raw)); trimmed != "" && (!json.Valid(raw) || trimmed[0] != '{') {
			t.Fatalf("accepted input that is not a JSON object: %q", raw)
		}
	})
}
