package mcpserver

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode"

	"github.com/agentexec/agentexec/jobs"
)

// MinTokenBits is the least entropy a bearer token must have: 32 random
// bytes.
const MinTokenBits = 256

// ErrWeakToken is returned for a token with less than MinTokenBits of
// entropy.
var ErrWeakToken = errors.New("mcpserver: the bearer token is too weak")

// TokenBits estimates a token's entropy in bits, as if each character were
// drawn at random from the classes it uses (hex digits; lower case, upper
// case, digits, other printable characters): an upper bound for a token
// someone chose, and the right figure for a random one. A token with few
// distinct characters ("aaaa...") counts as having almost none.
func TokenBits(tok string) float64 {
	if tok == "" {
		return 0
	}
	hexOnly, lower, upper, digit, other := true, false, false, false, false
	distinct := map[rune]bool{}
	for _, r := range tok {
		distinct[r] = true
		switch {
		case r >= '0' && r <= '9':
			digit = true
		case r >= 'a' && r <= 'z':
			lower = true
			hexOnly = hexOnly && r <= 'f'
		case r >= 'A' && r <= 'Z':
			upper = true
			hexOnly = hexOnly && r <= 'F'
		case unicode.IsPrint(r) && r != ' ':
			other, hexOnly = true, false
		default:
			return 0 // spaces and control characters: not a token
		}
	}
	alphabet := 0
	if hexOnly && !(lower && upper) {
		alphabet = 16
	} else {
		for _, c := range []struct {
			used bool
			n    int
		}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 32}} {
			if c.used {
				alphabet += c.n
			}
		}
	}
	n := len([]rune(tok))
	if len(distinct) < min(n/4, 10) {
		return float64(len(distinct))
	}
	return float64(n) * math.Log2(float64(alphabet))
}

// CheckToken refuses a token with less than MinTokenBits of entropy,
// saying how to make a good one.
func CheckToken(tok string) error {
	if bits := TokenBits(tok); bits < MinTokenBits {
		return fmt.Errorf("%w: it has at most %.0f bits of entropy and %d are needed (32 random bytes); make one with `openssl rand -hex 32`, or give none and agentexec generates one", ErrWeakToken, bits, MinTokenBits)
	}
	return nil
}

// GenerateToken returns a new random token: 32 bytes, hex-encoded.
func GenerateToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ReadTokens reads a token file: one token per line (one per client),
// blank lines and lines starting with # ignored.
func ReadTokens(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no token", path)
	}
	return out, nil
}

// WriteTokenFile writes token, mode 0600, to name in dir, a private
// directory it creates (owned by this user, 0700, not a link; refused
// otherwise). It returns the file's path.
func WriteTokenFile(dir, name, token string) (string, error) {
	if err := jobs.PrivateDir(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return "", fmt.Errorf("mcpserver: cannot write the token file: %w", err)
	}
	_, err = tmp.WriteString(token + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("mcpserver: cannot write the token file: %w", err)
	}
	return path, nil
}

// credential says which token a request presented: its index among the
// accepted tokens, or -1 when none is needed; ok is false when the
// request is not authorized.
func credential(r *http.Request, tokens []string) (id string, ok bool) {
	if len(tokens) == 0 {
		return "none", true
	}
	got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found {
		return "", false
	}
	match := -1
	for i, t := range tokens {
		// Every token is compared, whichever matches.
		if subtle.ConstantTimeCompare([]byte(got), []byte(t)) == 1 {
			match = i
		}
	}
	if match < 0 {
		return "", false
	}
	return fmt.Sprintf("token-%d", match), true
}

// bindings remember which credential created each HTTP session, so that a
// session id presented with another credential is refused.
type bindings struct {
	mu sync.Mutex
	by map[string]string // keyed hash of the session id -> credential
}

func (b *bindings) bind(key, cred string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by == nil {
		b.by = map[string]string{}
	}
	b.by[key] = cred
}

// check reports whether cred may use the session; unknown sessions are
// left to the SDK (which answers 404).
func (b *bindings) check(key, cred string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.by[key]
	return !ok || c == cred
}

func (b *bindings) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.by, key)
}

// prune forgets the sessions for which live returns false.
func (b *bindings) prune(live func(string) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.by {
		if !live(k) {
			delete(b.by, k)
		}
	}
}

// sessionKey is the keyed hash under which a session id is known: the id
// itself (a bearer secret) is never stored or recorded.
func (s *Server) sessionKey(id string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("session\x00" + id))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

// recorder notes the session id the SDK hands a new session, to bind it
// to the credential that created it.
type recorder struct {
	http.ResponseWriter
	onHeader func(http.Header)
	done     bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.done {
		r.done = true
		r.onHeader(r.Header())
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.done {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// Flush passes streaming through.
func (r *recorder) Flush() {
	if !r.done {
		r.WriteHeader(http.StatusOK)
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the real writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
