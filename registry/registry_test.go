package registry_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/internal/token"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
)

func TestValidScopes(t *testing.T) {
	cases := []struct {
		in   []string
		want string
	}{
		{[]string{"read"}, "read"},
		{[]string{"admin", "read", "append"}, "read,append,admin"},
		{[]string{"append", "admin"}, "append,admin"},
		{nil, "scopes_invalid"},
		{[]string{}, "scopes_invalid"},
		{[]string{"read", "read"}, "scopes_invalid"},
		{[]string{"write"}, "scopes_invalid"},
		{[]string{"read", "append", "admin", "read"}, "scopes_invalid"},
		{[]string{"READ"}, "scopes_invalid"},
	}
	for _, tc := range cases {
		got, err := registry.ValidScopes(tc.in)
		var ie *registry.InputError
		s := strings.Join(got, ",")
		if errors.As(err, &ie) {
			s = ie.Code
		}
		if s != tc.want {
			t.Errorf("ValidScopes(%v) = %s, want %s", tc.in, s, tc.want)
		}
	}
}

func TestFirstStartOnceAndOperatorHash(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := registry.FirstStart(ctx, st, false)
	if err != nil || b == nil || b.OperatorToken == "" || b.ProjectToken == "" {
		t.Fatalf("first start: %+v, %v", b, err)
	}
	id, _ := token.ID(b.ProjectToken)
	tok, err := st.GetToken(ctx, id)
	if err != nil || tok.ProjectID != b.ProjectID || strings.Join(tok.Scopes, ",") != "read,append,admin" || !token.Matches(b.ProjectToken, tok.Hash) {
		t.Fatalf("stored token %+v, %v", tok, err)
	}
	if strings.Contains(string(tok.Hash), b.ProjectToken) {
		t.Fatal("token stored in the clear")
	}
	hash, err := registry.OperatorHash(ctx, st, "")
	if err != nil || !token.Matches(b.OperatorToken, hash) {
		t.Fatalf("stored operator hash does not match: %v", err)
	}
	if given, _ := registry.OperatorHash(ctx, st, "from-env"); !token.Matches("from-env", given) {
		t.Fatal("a supplied operator token is not what is checked")
	}
	again, err := registry.FirstStart(ctx, st, false)
	if err != nil || again != nil {
		t.Fatalf("second start created something: %+v, %v", again, err)
	}
	if _, err := registry.CreateProject(ctx, st, "NOT-A-UUID"); err == nil {
		t.Fatal("accepted a bad project id")
	}
	if _, err := registry.CreateProject(ctx, st, b.ProjectID); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate project: %v", err)
	}
}

// TestDisplayNames: a display name is at most 256 bytes of UTF-8 without
// control characters (a newline forges a listing row, an escape sequence
// rewrites a terminal); nothing is stored for a refused one.
func TestDisplayNames(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "a.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := registry.CreateProject(context.Background(), st, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"billing-agent", true},
		{"Agent Ünïcødé 名前 🙂", true},
		{strings.Repeat("a", 256), true},
		{strings.Repeat("a", 257), false},
		{"bad\xffname", false},
		{"line\nforged", false},
		{"tab\there", false},
		{"esc\x1b[31m", false},
		{"del\x7f", false},
		{"c1\u0085", false},
		{"nul\x00", false},
		{"replacement\uFFFD", false},
	} {
		id, err := registry.CreateIdentity(context.Background(), st, p.ID, "", tc.name)
		var ie *registry.InputError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%q: %v", tc.name, err)
		case !tc.ok && (!errors.As(err, &ie) || ie.Code != "display_name_invalid"):
			t.Errorf("%q: %v (stored %+v), want display_name_invalid", tc.name, err, id)
		}
	}
	ids, err := st.ListIdentities(context.Background(), p.ID, "", 100)
	if err != nil || len(ids) != 4 {
		t.Fatalf("%d identities stored (%v), want the 4 accepted", len(ids), err)
	}
}
