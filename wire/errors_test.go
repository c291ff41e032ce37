package wire_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/handoff"
	"github.com/acrelay/acrelay/wire"
)

var (
	snakeCase  = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	matrixCode = regexp.MustCompile(`^M_[A-Z]+(_[A-Z]+)*$`)
)

// TestErrorTable checks every row: a status of 400–599, a message, a
// code given once, in snake_case (or a Matrix errcode, M_UPPER_CASE).
func TestErrorTable(t *testing.T) {
	rows := wire.ErrorCodes()
	if len(rows) < 100 {
		t.Fatalf("%d rows: the table lost codes", len(rows))
	}
	seen := map[string]bool{}
	for _, e := range rows {
		if e.Status < 400 || e.Status > 599 {
			t.Errorf("%s: status %d is not an error status", e.Code, e.Status)
		}
		if strings.TrimSpace(e.Message) == "" {
			t.Errorf("%s: no message", e.Code)
		}
		if seen[e.Code] {
			t.Errorf("%s: in the table twice", e.Code)
		}
		seen[e.Code] = true
		if !snakeCase.MatchString(e.Code) && !matrixCode.MatchString(e.Code) {
			t.Errorf("%q: not snake_case (nor a Matrix M_ errcode)", e.Code)
		}
		if got, ok := wire.LookupError(e.Code); !ok || got != e {
			t.Errorf("LookupError(%q) = %+v, %v", e.Code, got, ok)
		}
		if got := wire.ErrorStatus(e.Code); got != e.Status {
			t.Errorf("ErrorStatus(%q) = %d, want %d", e.Code, got, e.Status)
		}
	}
	if _, ok := wire.LookupError("no_such_code"); ok {
		t.Error("LookupError found a code the table does not hold")
	}
	if got := wire.ErrorStatus("no_such_code"); got != 500 {
		t.Errorf("ErrorStatus of an unknown code = %d, want 500", got)
	}
}

// TestErrorTableHoldsLowerCodes: the codes other packages choose (the
// strict-JSON reasons, an event's top-level codes, a refused transition)
// are rows with the status the relay answers them with.
func TestErrorTableHoldsLowerCodes(t *testing.T) {
	want := map[string]int{
		canonicaljson.ReasonInvalidJSON:              400,
		canonicaljson.ReasonDuplicateObjectName:      400,
		canonicaljson.ReasonFractionalNumber:         400,
		canonicaljson.ReasonNegativeZero:             400,
		canonicaljson.ReasonUnsafeInteger:            400,
		canonicaljson.ReasonInvalidJSONNumber:        400,
		canonicaljson.ReasonNULNotAdmitted:           400,
		canonicaljson.ReasonNonScalarUnicode:         400,
		canonicaljson.ReasonInvalidUTF8:              400,
		canonicaljson.ReasonJSONDepthExceeded:        400,
		correspondence.CodeEventInvalid:              400,
		correspondence.CodeSignatureEncodingInvalid:  400,
		handoff.CodeTransitionNotAllowed:             409,
		handoff.CodeResultRequired:                   409,
		handoff.CodeEvidenceRequired:                 409,
		wire.CodeCorrespondenceAppendUnavailable:     503,
		wire.CodeSignatureInvalid:                    403,
		wire.CodeEventIDCollision:                    409,
		wire.CodeCorrespondenceReadUnavailable:       503,
		wire.CodeCorrespondenceProjectionUnavailable: 503,
	}
	for code, status := range want {
		if got, ok := wire.LookupError(code); !ok || got.Status != status {
			t.Errorf("%s: row %+v (held: %v), want status %d", code, got, ok, status)
		}
	}
}

// moduleRoot is the directory of go.mod above wire.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod above wire: %v", err)
	}
	return root
}

// TestEveryCodeUsedIsInTheTable walks every non-test .go file of the
// repository and fails on an error answer built with a code the table
// does not hold.
func TestEveryCodeUsedIsInTheTable(t *testing.T) {
	root := moduleRoot(t)
	src := map[string]map[string][]byte{} // directory → file name → bytes
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "vendor", "node_modules":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		if src[rel] == nil {
			src[rel] = map[string][]byte{}
		}
		src[rel][filepath.Base(path)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	uses, dynamic := codeUses(t, src)
	if len(uses) < 120 {
		t.Fatalf("found %d constructions: the walk lost its way", len(uses))
	}
	perDir := map[string]int{}
	for _, u := range uses {
		perDir[strings.SplitN(u.pos, "/", 2)[0]]++
		if _, ok := wire.LookupError(u.code); !ok {
			t.Errorf("%s: error code %q (%s) is not in wire's error table (wire/errors.go)", u.pos, u.code, u.how)
		}
	}
	t.Logf("%d error constructions with a constant code (%d with a code chosen at run time), by top directory: %v", len(uses), dynamic, perDir)
}

// TestCodeWalkFindsUnknownCodes: the walk sees each kind of construction,
// so TestEveryCodeUsedIsInTheTable can fail.
func TestCodeWalkFindsUnknownCodes(t *testing.T) {
	src := map[string]map[string][]byte{
		"wire": {"codes.go": []byte(`package wire
const CodeBogus = "bogus_from_const"`)},
		"relay": {"x.go": []byte(`package relay
import (
	"net/http"
	"github.com/acrelay/acrelay/internal/apierror"
	w2 "github.com/acrelay/acrelay/wire"
)
const local = "bogus_local"
var (
	a = apierror.New(w2.CodeBogus).Say("x")
	b = apierror.New(local)
	c = errf(http.StatusTeapot, "bogus_errf", "x")
	d = &apiError{Status: 400, Code: "bogus_literal"}
	e = w2.Error{Error: "bogus_wire_error"}
	f = w2.MatrixError{Errcode: "M_BOGUS"}
	g = &hubError{418, "bogus_positional", "x"}
	h = apierror.New(w2.CodeBogus + "x")
)
func x(w http.ResponseWriter) {
	http.Error(w, "bogus_http_error", 418)
	http.Error(w, "a plain message", 418)
	_, _ = w.Write([]byte(` + "`" + `{"error":"bogus_json","message":"x"}` + "`" + `))
	_, _ = w.Write([]byte(` + "`" + `{"errcode":"M_BOGUS_JSON","error":"x"}` + "`" + `))
}`)},
	}
	uses, dynamic := codeUses(t, src)
	var got []string
	for _, u := range uses {
		got = append(got, u.code)
	}
	slices.Sort(got)
	want := []string{"M_BOGUS", "M_BOGUS_JSON", "bogus_errf", "bogus_from_const", "bogus_http_error", "bogus_json", "bogus_literal",
		"bogus_local", "bogus_positional", "bogus_wire_error"}
	if !slices.Equal(got, want) {
		t.Errorf("found %q,\nwant %q", got, want)
	}
	if dynamic != 1 {
		t.Errorf("%d dynamic codes, want 1", dynamic)
	}
}

type codeUse struct {
	pos, code, how string
}

const modulePath = "github.com/acrelay/acrelay/"

// errorTypes are the types whose composite literals build an error
// answer, with the field that holds the code (and its position when the
// literal is positional).
var errorTypes = map[string]struct {
	field string
	index int
}{
	"Error":           {"Error", -1}, // wire.Error
	"MatrixError":     {"Errcode", -1},
	"apiError":        {"Code", 1},
	"hubError":        {"Code", 1},
	"InputError":      {"Code", -1}, // registry
	"TransitionError": {"Code", -1}, // handoff
	"ValidationError": {"Code", -1}, // correspondence
}

// constructors are the functions whose argument at the index is a code.
var constructors = map[string]int{
	"New":   0, // apierror.New
	"Lower": 0,
	"Input": 0,
	"errf":  1, // errf(status, code, message), the relay's former helper
}

// jsonCode finds the code of an error body written as JSON text: the
// "errcode" of a Matrix error (whose "error" is a message), else "error".
var (
	jsonCode   = regexp.MustCompile(`"error"\s*:\s*"([A-Za-z0-9_]+)"`)
	jsonMatrix = regexp.MustCompile(`"errcode"\s*:\s*"([A-Za-z0-9_]+)"`)
)

// codeUses parses src (directory relative to the module → file → bytes)
// and returns every error construction whose code is a constant, and the
// number whose code is computed.
func codeUses(t *testing.T, src map[string]map[string][]byte) (uses []codeUse, dynamic int) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string][]*ast.File{}
	consts := map[string]map[string]string{} // directory → name → value
	for dir, names := range src {
		consts[dir] = map[string]string{}
		for name, b := range names {
			f, err := parser.ParseFile(fset, filepath.ToSlash(filepath.Join(dir, name)), b, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files[dir] = append(files[dir], f)
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if v, ok := stringLit(vs.Values[i]); ok {
								consts[dir][n.Name] = v
							}
						}
					}
				}
			}
		}
	}
	for dir, fs := range files {
		for _, f := range fs {
			imports := map[string]string{} // name in this file → directory
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if !strings.HasPrefix(p, modulePath) {
					continue
				}
				d := strings.TrimPrefix(p, modulePath)
				name := d[strings.LastIndex(d, "/")+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				imports[name] = d
			}
			resolve := func(e ast.Expr) (string, bool) {
				switch e := e.(type) {
				case *ast.BasicLit:
					return stringLit(e)
				case *ast.Ident:
					v, ok := consts[dir][e.Name]
					return v, ok
				case *ast.SelectorExpr:
					if x, ok := e.X.(*ast.Ident); ok {
						if d, ok := imports[x.Name]; ok {
							v, ok := consts[d][e.Sel.Name]
							return v, ok
						}
					}
				}
				return "", false
			}
			add := func(n ast.Node, e ast.Expr, how string) {
				if v, ok := resolve(e); ok {
					uses = append(uses, codeUse{fset.Position(n.Pos()).String(), v, how})
				} else {
					dynamic++
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					name, qual := funcName(n.Fun)
					if i, ok := constructors[name]; ok && i < len(n.Args) && (name == "errf" || qual == "apierror" || dir == "internal/apierror") {
						add(n, n.Args[i], qual+"."+name)
					}
					if name == "Error" && qual == "http" && len(n.Args) == 3 {
						if v, ok := stringLit(n.Args[1]); ok && snakeCase.MatchString(v) && strings.Contains(v, "_") {
							uses = append(uses, codeUse{fset.Position(n.Pos()).String(), v, "http.Error"})
						}
					}
				case *ast.CompositeLit:
					typ, qual := funcName(n.Type)
					et, ok := errorTypes[typ]
					switch {
					case typ == "Error" && (imports[qual] == "internal/apierror" || qual == "" && dir == "internal/apierror"):
						et = errorTypes["apiError"] // apierror.Error{Code: …}
					case typ == "Error" && imports[qual] != "wire" && !(qual == "" && dir == "wire"):
						return true // wire.Error and apierror.Error only, among the types named Error
					case !ok:
						return true
					}
					for i, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == et.field {
								add(n, kv.Value, typ+" literal")
							}
						} else if i == et.index {
							add(n, el, typ+" literal")
						}
					}
				case *ast.BasicLit:
					if n.Kind != token.STRING {
						return true
					}
					v, _ := stringLit(n)
					re := jsonCode
					if jsonMatrix.MatchString(v) {
						re = jsonMatrix
					}
					for _, m := range re.FindAllStringSubmatch(v, -1) {
						uses = append(uses, codeUse{fset.Position(n.Pos()).String(), m[1], "JSON text"})
					}
				}
				return true
			})
		}
	}
	return uses, dynamic
}

// funcName is the name of a function or type expression and its
// qualifier ("" when unqualified).
func funcName(e ast.Expr) (name, qual string) {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name, ""
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return e.Sel.Name, x.Name
		}
		return e.Sel.Name, ""
	case *ast.StarExpr:
		return funcName(e.X)
	}
	return "", ""
}

func stringLit(e ast.Expr) (string, bool) {
	l, ok := e.(*ast.BasicLit)
	if !ok || l.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(l.Value)
	return v, err == nil
}

// docsRow is a row of a docs/*.md error list: "| 400, 403 | `code`, … | when |".
var (
	docsRow   = regexp.MustCompile(`^\| ([45][0-9]{2}(?:, [45][0-9]{2})*) \| (.*?) \|`)
	docsAside = regexp.MustCompile(`\([^)]*\)`)
	docsCode  = regexp.MustCompile("`([^`]+)`")
)

// TestDocsListEveryCode: docs/http.md's error list (with the verifiable
// log's in docs/verifiable-log-reads.md) and the table agree: every row
// of the table is listed with its status, and every code listed is a row.
func TestDocsListEveryCode(t *testing.T) {
	root := moduleRoot(t)
	listed := map[string][]int{} // code → statuses of the rows naming it
	for _, name := range []string{"http.md", "verifiable-log-reads.md"} {
		b, err := os.ReadFile(filepath.Join(root, "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			m := docsRow.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			var statuses []int
			for _, s := range strings.Split(m[1], ", ") {
				n, _ := strconv.Atoi(s)
				statuses = append(statuses, n)
			}
			// "(with `issues`)" and the like are asides, not codes.
			for _, c := range docsCode.FindAllStringSubmatch(docsAside.ReplaceAllString(m[2], ""), -1) {
				listed[c[1]] = append(listed[c[1]], statuses...)
				if _, ok := wire.LookupError(c[1]); !ok {
					t.Errorf("docs/%s lists %q, which is not in wire's error table", name, c[1])
				}
			}
		}
	}
	for _, e := range wire.ErrorCodes() {
		if !slices.Contains(listed[e.Code], e.Status) {
			t.Errorf("%s (%d) is not in docs/http.md's error list with its status (listed with %v)", e.Code, e.Status, listed[e.Code])
		}
	}
}
