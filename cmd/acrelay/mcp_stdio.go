package main

// The stdio line filter of acrelay mcp: JSON-RPC 2.0 §5.1 says a message
// that is not valid JSON is answered with -32700 Parse error (id null) and
// the server goes on, but the SDK's IOTransport ends the session on any
// decode error. The filter sits between stdin and the SDK's transport.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// parseErrorLine is the JSON-RPC 2.0 answer to a line that is not JSON
// (§5.1, code -32700; the id is null because none could be read).
const parseErrorLine = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}` + "\n"

// invalidRequestLine is the JSON-RPC 2.0 answer to a line that is JSON but
// not a JSON-RPC message the SDK reads (§5.1, code -32600), such as 42,
// {} or an empty batch: the SDK's transport would end the session on it.
const invalidRequestLine = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}` + "\n"

// lockedWriter serializes writes to stdout: the SDK writes each message
// (JSON plus its newline) in one Write call under its own lock, and the
// line filter writes its Parse error answers through the same lockedWriter,
// so lines never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lockedWriter) Close() error { return nil }

// stdioLineFilter reads newline-delimited messages (MCP stdio transport:
// one message a line, no embedded newlines) and hands the SDK only lines
// that are JSON-RPC messages, each with its newline. For a line that is
// not JSON, or longer than max bytes, it writes parseErrorLine to out; for
// JSON that is not a JSON-RPC message, invalidRequestLine; either way it
// logs one line and goes on. Blank lines are skipped.
type stdioLineFilter struct {
	r       *bufio.Reader
	out     io.Writer
	log     *slog.Logger
	max     int
	pending []byte
	err     error // the reader's error, returned once pending is drained
}

func newStdioLineFilter(r io.Reader, out io.Writer, log *slog.Logger) *stdioLineFilter {
	return &stdioLineFilter{r: bufio.NewReaderSize(r, 64<<10), out: out, log: log, max: mcp.DefaultMaxLineLength}
}

// Read implements io.Reader; it returns the underlying reader's error
// (io.EOF at the end of stdin) once every line before it is handed on.
func (f *stdioLineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, tooLong, err := f.readLine()
		f.err = err
		trimmed := bytes.TrimSpace(line)
		switch {
		case tooLong:
			f.refuse(parseErrorLine, "line longer than the limit", "max_bytes", f.max)
		case len(trimmed) == 0:
		case !json.Valid(trimmed):
			f.refuse(parseErrorLine, "line is not JSON", "bytes", len(line))
		case !jsonrpcMessage(trimmed):
			f.refuse(invalidRequestLine, "line is not a JSON-RPC message", "bytes", len(line))
		default:
			f.pending = append(trimmed, '\n')
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// readLine returns the next line without its newline; a line of more than
// max bytes before its newline is read to its end and discarded
// (tooLong). err is the reader's error after a last line that had no
// newline.
func (f *stdioLineFilter) readLine() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := f.r.ReadSlice('\n')
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		if !tooLong {
			if len(line)+len(chunk) > f.max {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}

// jsonrpcMessage reports whether a line of valid JSON is what the SDK's
// transport reads: one JSON-RPC message, or a non-empty array of them
// (a batch), each decoding with the SDK's own jsonrpc.DecodeMessage.
func jsonrpcMessage(line []byte) bool {
	if line[0] != '[' {
		_, err := jsonrpc.DecodeMessage(line)
		return err == nil
	}
	var batch []json.RawMessage
	if json.Unmarshal(line, &batch) != nil || len(batch) == 0 {
		return false
	}
	for _, m := range batch {
		if _, err := jsonrpc.DecodeMessage(m); err != nil {
			return false
		}
	}
	return true
}

// refuse answers a line with answer (parseErrorLine or
// invalidRequestLine) and logs why (never the line's content, which may
// hold anything).
func (f *stdioLineFilter) refuse(answer, why string, args ...any) {
	name := "-32700 Parse error"
	if answer == invalidRequestLine {
		name = "-32600 Invalid Request"
	}
	f.log.Warn("mcp stdio: answered "+name+": "+why, args...)
	if _, err := io.WriteString(f.out, answer); err != nil {
		f.log.Warn("mcp stdio: writing the error answer", "err", err)
	}
}
