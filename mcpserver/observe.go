package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/agentexec/agentexec/tool"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rpcIDHeader carries, from the HTTP handler to the request's observer,
// the JSON-RPC id of the message a POST carries. The HTTP handler sets it
// (replacing any value the client sent) when the registry has an
// Observer.
const rpcIDHeader = "X-Agentexec-Rpc-Id"

// metaRPCID is the params._meta key under which the stdio connection
// hands a request's JSON-RPC id to the request's observer (the SDK keeps
// the id to itself). It is set, replacing any value a client sent, on
// every request when the registry has an Observer, and removed before the
// request is served.
const metaRPCID = "io.agentexec/jsonrpc-id"

// tagRPCID returns params (a JSON object, or empty) with id under
// params._meta[metaRPCID]. Params that are not an object are returned as
// they are, for the SDK to refuse.
func tagRPCID(params json.RawMessage, id string) json.RawMessage {
	var p map[string]json.RawMessage
	if len(bytes.TrimSpace(params)) == 0 {
		p = map[string]json.RawMessage{}
	} else if json.Unmarshal(params, &p) != nil || p == nil {
		return params
	}
	var meta map[string]json.RawMessage
	if raw, ok := p["_meta"]; ok {
		if json.Unmarshal(raw, &meta) != nil || meta == nil {
			return params
		}
	} else {
		meta = map[string]json.RawMessage{}
	}
	meta[metaRPCID], _ = json.Marshal(id)
	p["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// observeRequests is the receiving middleware that tells the registry's
// Observer about each MCP request (notifications are not requests): it
// opens the request's span, with its parent from params._meta, and closes
// it with the error type the semantic conventions name ("tool_error" for a
// tool result marked as an error, the JSON-RPC code for a protocol error).
func (s *Server) observeRequests(obs tool.Observer) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			info := tool.RequestInfo{Method: method, Transport: "pipe"}
			if p := req.GetParams(); !isNil(p) {
				info.Meta = p.GetMeta()
				if id, ok := info.Meta[metaRPCID].(string); ok {
					// Put there by the stdio connection; the tools never
					// see it.
					info.ID = id
					delete(info.Meta, metaRPCID)
				}
				if ct, ok := p.(*mcp.CallToolParamsRaw); ok {
					info.Tool = ct.Name
				}
			}
			if extra := req.GetExtra(); extra != nil && extra.Header != nil {
				info.Transport = "tcp"
				if strings.Contains(extra.Header.Get(credentialHeader), "/uid-") {
					info.Transport = "unix"
				}
				info.ID = extra.Header.Get(rpcIDHeader)
				info.ProtocolVersion = extra.Header.Get("Mcp-Protocol-Version")
			}
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
				s.mu.Lock()
				if se := s.sessions[ss]; se != nil {
					info.Session = se.id
				}
				s.mu.Unlock()
			}
			ctx, end := obs.StartRequest(ctx, info)
			res, err := next(ctx, method, req)
			var e tool.RequestEnd
			var werr *jsonrpc.Error
			switch {
			case errors.As(err, &werr):
				e.ErrorType, e.Message = strconv.FormatInt(werr.Code, 10), werr.Message
			case errors.Is(err, context.Canceled):
				e.ErrorType, e.Message = "cancelled", "the request was cancelled"
			case err != nil:
				e.ErrorType, e.Message = "_OTHER", err.Error()
			default:
				// The result's text can hold a command's output: only its
				// error flag is recorded.
				if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
					e.ErrorType = "tool_error"
				}
			}
			end(e)
			return res, err
		}
	}
}

// isNil reports whether p is nil or a nil pointer in an interface.
func isNil(p mcp.Params) bool {
	if p == nil {
		return true
	}
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// peekRPCID reads the JSON-RPC id of the message in r's body, leaving the
// body to be read again, and puts it in rpcIDHeader. A body that is not a
// single JSON-RPC request leaves the header empty.
func peekRPCID(r *http.Request) {
	r.Header.Del(rpcIDHeader)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// The SDK reads what was read, then the same error, and answers.
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errorReader{err}))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 || string(msg.ID) == "null" {
		return
	}
	id := string(msg.ID)
	if s, err := strconv.Unquote(id); err == nil {
		id = s
	}
	if len(id) > 128 {
		id = id[:128]
	}
	r.Header.Set(rpcIDHeader, id)
}

// errorReader fails every read with its error.
type errorReader struct{ err error }

func (e errorReader) Read([]byte) (int, error) { return 0, e.err }
