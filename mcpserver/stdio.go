package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxLineBytes bounds one line (one JSON-RPC message) read over
// stdio: a longer line is answered with an invalid-request error and
// skipped, not buffered.
const DefaultMaxLineBytes = 16 << 20

// lineConn is the stdio connection: newline-delimited JSON-RPC, read in
// front of the SDK so that a bad line is answered (parse error -32700 or
// invalid request -32600, id null when the id cannot be known) and
// skipped instead of ending the session, as the SDK's own reader does.
// It also answers a request whose id is already in use by a request still
// running, which the SDK would drop without a word.
type lineConn struct {
	in  io.ReadCloser
	out io.Writer
	max int

	lines  chan lineOrErr
	closed chan struct{}
	once   sync.Once

	wmu sync.Mutex // serialises writes to out

	idMu     sync.Mutex
	inFlight map[string]bool // ids of requests not yet answered

	// tagIDs puts each request's id in its params._meta under metaRPCID,
	// for the request's observer (see observeRequests).
	tagIDs bool
}

type lineOrErr struct {
	line    []byte
	tooLong int64 // the size of a line that was over the limit
	err     error
}

// newLineConn reads messages from in and writes them to out; max bounds a
// line (zero: DefaultMaxLineBytes).
func newLineConn(in io.ReadCloser, out io.Writer, max int) *lineConn {
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	c := &lineConn{in: in, out: out, max: max, lines: make(chan lineOrErr), closed: make(chan struct{}), inFlight: map[string]bool{}}
	go c.readLoop()
	return c
}

// readLoop hands each line to Read. It ends at the end of the input, or
// when the connection is closed (which closes the input).
func (c *lineConn) readLoop() {
	lr := &lineReader{r: bufio.NewReaderSize(c.in, 64<<10), max: c.max}
	for {
		line, tooLong, err := lr.next()
		select {
		case c.lines <- lineOrErr{line: line, tooLong: tooLong, err: err}:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// lineReader splits its input into lines of at most max bytes; a longer
// line is skipped to its end and reported by its size.
type lineReader struct {
	r   *bufio.Reader
	max int
	err error // returned after the last line
}

// next returns the next line (without its newline), or, for a line over
// the limit, nil and its length; err is set at the end of the input, after
// a last line without a newline has been returned.
func (lr *lineReader) next() (line []byte, tooLong int64, err error) {
	if lr.err != nil {
		return nil, 0, lr.err
	}
	var buf []byte
	var size int64
	for {
		chunk, err := lr.r.ReadSlice('\n')
		size += int64(len(chunk))
		if tooLong == 0 {
			if len(buf)+len(chunk) > lr.max+1 { // +1: the newline
				tooLong, buf = 1, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			lr.err = err
			if size == 0 {
				return nil, 0, err
			}
		}
		if tooLong != 0 {
			return nil, size, nil
		}
		return bytes.TrimSuffix(buf, []byte{'\n'}), 0, nil
	}
}

// SessionID is empty: stdio has no session id.
func (c *lineConn) SessionID() string { return "" }

// Read returns the next valid message, answering and skipping every line
// that is not one.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var l lineOrErr
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case l = <-c.lines:
		}
		if l.err != nil && l.line == nil {
			return nil, l.err
		}
		if l.tooLong > 0 {
			c.writeError(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("a message of %d bytes is over the limit of %d bytes for one line; it was skipped. Send smaller arguments (large inputs belong in files)", l.tooLong, c.max))
			continue
		}
		msg, le := decodeLine(l.line)
		if le != nil {
			c.writeError(le.id, le.code, le.msg)
			continue
		}
		if msg == nil {
			continue // a blank line
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			key := idKey(req.ID)
			c.idMu.Lock()
			dup := c.inFlight[key]
			if !dup {
				c.inFlight[key] = true
			}
			c.idMu.Unlock()
			if dup {
				c.writeError(rawID(req.ID), jsonrpc.CodeInvalidRequest, fmt.Sprintf("request id %s is already used by a request still running; give every request its own id", rawID(req.ID)))
				continue
			}
			if c.tagIDs {
				req.Params = tagRPCID(req.Params, fmt.Sprint(rawID(req.ID)))
			}
		}
		return msg, nil
	}
}

// Write sends msg on its own line. A write that fails (the client closed
// its end) ends the connection, so that the calls it started end too.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcpserver: encoding a message: %w", err)
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		c.idMu.Lock()
		delete(c.inFlight, idKey(resp.ID))
		c.idMu.Unlock()
	}
	return c.writeLine(append(data, '\n'))
}

func (c *lineConn) writeLine(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.out.Write(data); err != nil {
		c.hangup()
		return err
	}
	return nil
}

// wireError is an error response written by the reader itself.
type wireError struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id"`
	Error   struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError answers a message the SDK never sees; id nil writes id null.
func (c *lineConn) writeError(id any, code int64, msg string) {
	w := wireError{JSONRPC: "2.0", ID: id}
	w.Error.Code, w.Error.Message = code, msg
	b, _ := json.Marshal(w)
	c.writeLine(append(b, '\n'))
}

// hangup ends the connection as if the client had gone: Read returns EOF.
func (c *lineConn) hangup() { c.once.Do(func() { close(c.closed) }) }

// Close ends the connection and closes the input.
func (c *lineConn) Close() error {
	c.hangup()
	return c.in.Close()
}

// lineError is why a line is not a message, and how to answer it.
type lineError struct {
	id   any // nil: null
	code int64
	msg  string
}

// decodeLine turns one line into a message. A blank line gives (nil, nil);
// anything that is not one JSON-RPC 2.0 request, notification or response
// gives the error to answer with.
func decodeLine(line []byte) (jsonrpc.Message, *lineError) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	parseErr := func(detail string) *lineError {
		return &lineError{code: jsonrpc.CodeParseError, msg: "parse error: the line is not valid JSON (" + detail + "); send one JSON-RPC 2.0 message per line"}
	}
	invalid := func(id any, detail string) *lineError {
		return &lineError{id: id, code: jsonrpc.CodeInvalidRequest, msg: "invalid request: " + detail}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if line[0] == '[' {
				return nil, invalid(nil, "batches are not supported; send one JSON-RPC message per line")
			}
			return nil, invalid(nil, "a message must be a JSON object, not "+te.Value)
		}
		return nil, parseErr(shortErr(err))
	}
	if fields == nil {
		return nil, invalid(nil, "a message must be a JSON object, not null")
	}
	// The id first, so that other problems can be answered with it.
	var id any
	rawIDField, hasID := fields["id"]
	if hasID {
		var ok bool
		if id, ok = validID(rawIDField); !ok {
			return nil, invalid(nil, `"id" must be a string or an integer`)
		}
	}
	if v, ok := fields["jsonrpc"]; !ok || string(bytes.TrimSpace(v)) != `"2.0"` {
		return nil, invalid(id, `"jsonrpc" must be "2.0"`)
	}
	method, hasMethod := fields["method"]
	if hasMethod {
		var name string
		if json.Unmarshal(method, &name) != nil || name == "" {
			return nil, invalid(id, `"method" must be a non-empty string`)
		}
		if p, ok := fields["params"]; ok {
			if p = bytes.TrimSpace(p); len(p) == 0 || (p[0] != '{' && p[0] != '[') {
				return nil, invalid(id, `"params" must be an object`)
			}
		}
	} else {
		_, hasResult := fields["result"]
		_, hasError := fields["error"]
		if !hasID || hasResult == hasError {
			return nil, invalid(id, `a message needs a "method" (a request or notification), or an "id" and one of "result" and "error" (a response)`)
		}
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return nil, invalid(id, shortErr(err))
	}
	return msg, nil
}

// validID returns an id as it is written back (a string or an int64),
// and whether it is one JSON-RPC and the SDK both accept.
func validID(raw json.RawMessage) (any, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return s, true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n == math.MinInt64 {
			return nil, false
		}
		return n, true
	}
	return nil, false
}

// rawID is id as it is written back.
func rawID(id jsonrpc.ID) any { return id.Raw() }

// idKey tells ids apart by type and value (1 and "1" are different ids).
func idKey(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case string:
		return "s" + v
	case int64:
		return "n" + strconv.FormatInt(v, 10)
	}
	return fmt.Sprintf("?%v", id.Raw())
}

// shortErr bounds an error's text for an answer.
func shortErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// lineTransport is the mcp.Transport of one lineConn.
type lineTransport struct {
	in  io.ReadCloser
	out io.Writer
	max int
	// hook, if set, gets the connection once made (to watch the output).
	hook func(*lineConn)
	// tagIDs: see lineConn.tagIDs.
	tagIDs bool
}

// Connect makes the connection.
func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := newLineConn(t.in, t.out, t.max)
	c.tagIDs = t.tagIDs
	if t.hook != nil {
		t.hook(c)
	}
	return c, nil
}
