package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ValidationError says which input field is wrong and how. Field is empty
// when the input as a whole is wrong (not a JSON object).
type ValidationError struct {
	Field   string
	Problem string
}

// Error returns "<field>: <problem>" or the problem alone.
func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Args is a decoded JSON input object: each field kept raw until a typed
// getter reads it, so that every problem can name its field.
type Args struct {
	fields map[string]json.RawMessage
}

// ParseArgs decodes raw as a JSON object whose keys are all in allowed.
// Empty input is an empty object. It rejects invalid JSON, values that are
// not objects, duplicate keys, unknown keys (naming the accepted ones) and
// invalid UTF-8 (naming the field).
func ParseArgs(raw json.RawMessage, allowed ...string) (*Args, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return &Args{fields: map[string]json.RawMessage{}}, nil
	}
	if !utf8.Valid(raw) {
		return nil, invalidUTF8(raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, invalid("", "the input is not valid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, invalid("", "the input must be a JSON object, not %s", jsonKind(tok))
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid("", "the input is not valid JSON: %v", err)
		}
		key := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			if key == "" {
				return nil, invalid("", "the input is not valid JSON: %v", err)
			}
			return nil, invalid(key, "has a value that is not valid JSON: %v", err)
		}
		if _, dup := fields[key]; dup {
			return nil, invalid(key, "is given more than once")
		}
		if !contains(allowed, key) {
			return nil, invalid(key, "is not a known field; the accepted fields are %s", strings.Join(allowed, ", "))
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, invalid("", "the input is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("", "the input has data after the JSON object")
	}
	return &Args{fields: fields}, nil
}

// invalidUTF8 names the field whose value holds the invalid UTF-8 in raw.
func invalidUTF8(raw []byte) *ValidationError {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err == nil && tok == json.Delim('{') {
		for dec.More() {
			start := dec.InputOffset()
			if _, err := dec.Token(); err != nil {
				break
			}
			if !utf8.Valid(raw[start:dec.InputOffset()]) {
				return invalid("", "a field name is not valid UTF-8")
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				break
			}
			if !utf8.Valid(v) {
				return invalid(fieldName(raw[start:]), "is not valid UTF-8")
			}
		}
	}
	return invalid("", "the input is not valid UTF-8")
}

// fieldName reads the JSON string key at the start of b (after spaces and
// a comma).
func fieldName(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimLeft(b, " \t\r\n,")))
	var k string
	dec.Decode(&k)
	return k
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func jsonKind(tok any) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "something else"
}

// kindOf names the JSON type of a raw value.
func kindOf(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// Has reports whether field is present and not null. Null counts as absent
// for optional fields, as the seeds' parsers treat it.
func (a *Args) Has(field string) bool {
	v, ok := a.fields[field]
	return ok && kindOf(v) != "null"
}

// String returns field's string value; ok is false when it is absent or
// null. Any other JSON type is an error.
func (a *Args) String(field string) (s string, ok bool, err error) {
	if !a.Has(field) {
		return "", false, nil
	}
	v := a.fields[field]
	if kindOf(v) != "a string" {
		return "", false, invalid(field, "must be a string, not %s", kindOf(v))
	}
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false, invalid(field, "is not a valid JSON string: %v", err)
	}
	return s, true, nil
}

// StringList returns field's array of strings; ok is false when absent or
// null. Elements that are not strings (null included) are errors naming
// their index.
func (a *Args) StringList(field string) (list []string, ok bool, err error) {
	if !a.Has(field) {
		return nil, false, nil
	}
	v := a.fields[field]
	if kindOf(v) != "an array" {
		return nil, false, invalid(field, "must be an array of strings, not %s", kindOf(v))
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, false, invalid(field, "is not a valid JSON array: %v", err)
	}
	list = make([]string, len(raw))
	for i, e := range raw {
		if kindOf(e) != "a string" {
			return nil, false, invalid(fmt.Sprintf("%s[%d]", field, i), "must be a string, not %s", kindOf(e))
		}
		if err := json.Unmarshal(e, &list[i]); err != nil {
			return nil, false, invalid(fmt.Sprintf("%s[%d]", field, i), "is not a valid JSON string: %v", err)
		}
	}
	return list, true, nil
}

// StringMap returns field's object of string values, with its keys sorted
// in Keys order; ok is false when absent or null. Values that are not
// strings (null included) are errors naming their key; so are duplicate
// keys.
func (a *Args) StringMap(field string) (m map[string]string, keys []string, ok bool, err error) {
	if !a.Has(field) {
		return nil, nil, false, nil
	}
	v := a.fields[field]
	if kindOf(v) != "an object" {
		return nil, nil, false, invalid(field, "must be an object of strings, not %s", kindOf(v))
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.Token() // '{'
	m = map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false, invalid(field, "is not a valid JSON object: %v", err)
		}
		key := tok.(string)
		var e json.RawMessage
		if err := dec.Decode(&e); err != nil {
			return nil, nil, false, invalid(field+"."+key, "is not valid JSON: %v", err)
		}
		if kindOf(e) != "a string" {
			return nil, nil, false, invalid(field+"."+key, "must be a string, not %s", kindOf(e))
		}
		if _, dup := m[key]; dup {
			return nil, nil, false, invalid(field+"."+key, "is given more than once")
		}
		var s string
		json.Unmarshal(e, &s)
		m[key] = s
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return m, keys, true, nil
}

// ErrNotNumber is wrapped by Number errors for values of the wrong type.
var ErrNotNumber = errors.New("not a number")

// NumberRule says which spellings of a number a field accepts.
type NumberRule struct {
	// Strings accepts numeric strings ("30", "2.5"), as seed 000 does.
	Strings bool
	// Fractions accepts numbers with a fractional part.
	Fractions bool
}

// Number returns field's numeric value; ok is false when absent or null.
// Values too large for a float64 are errors, so are booleans, arrays,
// objects and (unless rule.Strings) strings.
func (a *Args) Number(field string, rule NumberRule) (f float64, ok bool, err error) {
	if !a.Has(field) {
		return 0, false, nil
	}
	v := a.fields[field]
	text := string(bytes.TrimSpace(v))
	switch kindOf(v) {
	case "a number":
	case "a string":
		if !rule.Strings {
			return 0, false, invalid(field, "must be a number, not a string")
		}
		json.Unmarshal(v, &text)
		text = strings.TrimSpace(text)
		word := strings.ToLower(strings.TrimLeft(text, "+-"))
		_, perr := strconv.ParseFloat(text, 64)
		if text == "" || strings.ContainsAny(text, "xXpP_") || word == "inf" || word == "infinity" || word == "nan" ||
			(perr != nil && !errors.Is(perr, strconv.ErrRange)) {
			return 0, false, invalid(field, "must be a number; %q is not one", shorten(text, 40))
		}
	default:
		return 0, false, invalid(field, "must be a number, not %s", kindOf(v))
	}
	f, perr := strconv.ParseFloat(text, 64)
	if perr != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false, invalid(field, "must be a number within range; %s is not", shorten(text, 40))
	}
	if !rule.Fractions && f != math.Trunc(f) {
		return 0, false, invalid(field, "must be a whole number, not %s", shorten(text, 40))
	}
	return f, true, nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Saturate converts f to an int64, truncating toward zero and saturating at
// the int64 range.
func Saturate(f float64) int64 {
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// MaxArgBytes is the longest single argument or environment entry Linux
// accepts for a new program (MAX_ARG_STRLEN, 32 pages, less the NUL).
const MaxArgBytes = 128<<10 - 1

// MaxArgTotal bounds all arguments and environment entries of one program
// together, well inside Linux's usual ARG_MAX of 2 MiB.
const MaxArgTotal = 1 << 20

// CheckArgString checks that s can be passed to a program as one argument
// or environment entry: no NUL byte, at most MaxArgBytes bytes.
func CheckArgString(field, s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return invalid(field, "contains a NUL byte (at byte %d); programs cannot receive NUL bytes in arguments", i)
	}
	if len(s) > MaxArgBytes {
		return invalid(field, "is %d bytes; the limit for one argument is %d bytes. Write long content to a file and pass its path instead", len(s), MaxArgBytes)
	}
	return nil
}

// CheckEnv checks environment entries given as field (keys in order):
// keys non-empty without '=' or NUL, each KEY=value passable to a program.
// It returns the bytes the entries take in a program's environment.
func CheckEnv(field string, env map[string]string, keys []string) (int, error) {
	total := 0
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return 0, invalid(field+"."+k, "keys must be non-empty and contain neither '=' nor NUL")
		}
		if err := CheckArgString(field+"."+k, k+"="+env[k]); err != nil {
			return 0, err
		}
		total += len(k) + len(env[k]) + 2
	}
	return total, nil
}

// Bool returns field's boolean value; ok is false when it is absent, null
// or not a boolean.
func (a *Args) Bool(field string) (v bool, ok bool) {
	if !a.Has(field) {
		return false, false
	}
	switch string(bytes.TrimSpace(a.fields[field])) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
