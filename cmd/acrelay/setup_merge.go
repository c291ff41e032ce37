package main

// Merging acrelay's entries into a coding client's configuration files
// without disturbing anything else in them: JSON objects keep their
// members and member order (go-json-experiment/json's jsontext reads
// and re-indents them), TOML files keep every line outside the tables
// acrelay owns (go-toml/v2 renders acrelay's table and checks that the
// rest of the document reads back unchanged), and a unified diff shows
// what a write changes.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	toml "github.com/pelletier/go-toml/v2"
)

// jsonObject is a JSON object that keeps its members' order; values stay
// the raw bytes they were read as.
type jsonObject struct {
	names []string
	vals  map[string]jsontext.Value
}

// parseJSONObject reads one JSON object (an empty or blank input is an
// empty object). Errors: not JSON, not an object, a duplicate name.
func parseJSONObject(data []byte) (*jsonObject, error) {
	o := &jsonObject{vals: map[string]jsontext.Value{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return o, nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, fmt.Errorf("not JSON (comments are not read here): %w", err)
	}
	if tok.Kind() != '{' {
		return nil, errors.New("not a JSON object")
	}
	for dec.PeekKind() != '}' {
		nt, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		name := nt.String() // before the next read voids the token
		v, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		if _, dup := o.vals[name]; dup {
			return nil, fmt.Errorf("not JSON: duplicate member %q", name)
		}
		o.set(name, v.Clone())
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("not JSON: data after the object")
	}
	return o, nil
}

func (o *jsonObject) get(name string) (jsontext.Value, bool) {
	v, ok := o.vals[name]
	return v, ok
}

// set replaces a member's value in place, or appends the member.
func (o *jsonObject) set(name string, v jsontext.Value) {
	if _, ok := o.vals[name]; !ok {
		o.names = append(o.names, name)
	}
	o.vals[name] = v
}

// object returns member name as an object (a new empty one when absent).
// Error when it exists and is not an object.
func (o *jsonObject) object(name string) (*jsonObject, error) {
	v, ok := o.get(name)
	if !ok {
		return parseJSONObject(nil)
	}
	if v.Kind() != '{' {
		return nil, fmt.Errorf("%q is not an object", name)
	}
	return parseJSONObject(v)
}

// setObject stores sub as member name.
func (o *jsonObject) setObject(name string, sub *jsonObject) {
	o.set(name, sub.compact())
}

// compact is the object as compact JSON.
func (o *jsonObject) compact() jsontext.Value {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range o.names {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := jsontext.AppendQuote(nil, n)
		b.Write(name)
		b.WriteByte(':')
		b.Write(o.vals[n])
	}
	b.WriteByte('}')
	v := jsontext.Value(b.Bytes())
	_ = v.Compact()
	return v
}

// indented is the object as the file is written: two-space indent and a
// final newline.
func (o *jsonObject) indented() []byte {
	v := o.compact()
	if err := v.Indent(jsontext.WithIndent("  ")); err != nil {
		return append(v, '\n')
	}
	return append(v, '\n')
}

// jsonArray reads a JSON array's elements (nil for an absent member).
func jsonArray(v jsontext.Value) ([]jsontext.Value, error) {
	if v == nil {
		return nil, nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	tok, err := dec.ReadToken()
	if err != nil || tok.Kind() != '[' {
		return nil, errors.New("not an array")
	}
	var out []jsontext.Value
	for dec.PeekKind() != ']' {
		e, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		out = append(out, e.Clone())
	}
	return out, nil
}

// arrayValue joins elements into a JSON array.
func arrayValue(elems []jsontext.Value) jsontext.Value {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, e := range elems {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// tomlHeader matches a table or array-of-tables header line.
var tomlHeader = regexp.MustCompile(`^\s*\[\[?\s*([^\]#]+?)\s*\]\]?\s*(#.*)?$`)

// tomlReplaceTable rewrites doc so that the table named name (dotted,
// e.g. "mcp_servers.acrelay") and its sub-tables hold exactly body (the
// key = value lines go-toml renders for it), keeping every other line.
// An existing table is replaced where it stands; a new one is appended.
// Then it checks with go-toml that the result parses and that everything
// outside name reads back as it did. Errors: doc or the result is not
// TOML, or name is defined in a way this edit cannot see (an inline table
// or dotted keys): then the file is left to be edited by hand.
func tomlReplaceTable(doc []byte, name string, body []byte) ([]byte, error) {
	var before map[string]any
	if err := toml.Unmarshal(doc, &before); err != nil {
		return nil, fmt.Errorf("not TOML: %w", err)
	}
	lines := strings.SplitAfter(string(doc), "\n")
	var out strings.Builder
	inside, replaced, blank := false, false, false
	section := "[" + name + "]\n" + string(body)
	for _, l := range lines {
		if l == "" {
			continue
		}
		if m := tomlHeader.FindStringSubmatch(strings.TrimRight(l, "\r\n")); m != nil {
			key := strings.ReplaceAll(strings.ReplaceAll(m[1], " ", ""), "\t", "")
			own := key == name || strings.HasPrefix(key, name+".")
			if own && !replaced {
				out.WriteString(section)
				replaced, blank = true, true
			}
			inside = own
			if own {
				continue
			}
		}
		if inside {
			continue
		}
		if blank {
			// One blank line between acrelay's table and what follows it.
			if strings.TrimSpace(l) != "" {
				out.WriteString("\n")
			}
			blank = false
		}
		out.WriteString(l)
	}
	if !replaced {
		s := out.String()
		if s != "" && !strings.HasSuffix(s, "\n") {
			out.WriteString("\n")
		}
		if s != "" {
			out.WriteString("\n")
		}
		out.WriteString(section)
	}
	res := []byte(out.String())
	var after map[string]any
	if err := toml.Unmarshal(res, &after); err != nil {
		return nil, fmt.Errorf("%s is defined in a way this edit cannot replace (an inline table or dotted keys?): edit it by hand (%v)", name, err)
	}
	var want map[string]any
	if err := toml.Unmarshal([]byte(section), &want); err != nil {
		return nil, err
	}
	path := strings.Split(name, ".")
	if !reflect.DeepEqual(lookupTOML(after, path), lookupTOML(want, path)) {
		return nil, fmt.Errorf("%s is defined in a way this edit cannot replace: edit it by hand", name)
	}
	deleteTOML(before, path)
	deleteTOML(after, path)
	if !reflect.DeepEqual(before, after) {
		return nil, fmt.Errorf("replacing %s would change other settings: edit it by hand", name)
	}
	return res, nil
}

func lookupTOML(m map[string]any, path []string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// deleteTOML removes path from m, and the parents it leaves empty.
func deleteTOML(m map[string]any, path []string) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	sub, ok := m[path[0]].(map[string]any)
	if !ok {
		return
	}
	deleteTOML(sub, path[1:])
	if len(sub) == 0 {
		delete(m, path[0])
	}
}

// unifiedDiff is a unified diff (3 lines of context) from a to b under
// the name path; "" when they are equal.
func unifiedDiff(path string, a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	al, bl := splitLines(a), splitLines(b)
	// Longest common subsequence table, from the ends.
	n, m := len(al), len(bl)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte // ' ', '-', '+'
		text string
		ai   int // line numbers (0-based) in a and b before this op
		bi   int
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && al[i] == bl[j]:
			ops = append(ops, op{' ', al[i], i, j})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', al[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', bl[j], i, j})
			j++
		}
	}
	var out strings.Builder
	old := "a/" + path
	if len(a) == 0 {
		old = "/dev/null"
	}
	fmt.Fprintf(&out, "--- %s\n+++ b/%s\n", old, path)
	const ctx = 3
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		start := max(0, k-ctx)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		var na, nb int
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				na++
			}
			if o.kind != '-' {
				nb++
			}
		}
		as, bs := ops[start].ai+1, ops[start].bi+1
		if na == 0 {
			as--
		}
		if nb == 0 {
			bs--
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", as, na, bs, nb)
		for _, o := range ops[start:end] {
			out.WriteByte(o.kind)
			out.WriteString(o.text)
			out.WriteByte('\n')
		}
		k = end
	}
	return out.String()
}

func splitLines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
