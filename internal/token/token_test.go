package token

import "testing"

func TestRoundTrip(t *testing.T) {
	id, tok, hash := New()
	got, err := ID(tok)
	if err != nil || got != id {
		t.Fatalf("ID(%q) = %q, %v; want %q", tok, got, err, id)
	}
	if !Matches(tok, hash) {
		t.Fatal("token does not match its own hash")
	}
	if Matches(tok+"x", hash) {
		t.Fatal("altered token matches")
	}
	for _, bad := range []string{"", "acr_", "Bearer x", "acr_" + id, "xyz_" + tok[4:]} {
		if _, err := ID(bad); err == nil {
			t.Errorf("ID(%q) accepted", bad)
		}
	}
}
