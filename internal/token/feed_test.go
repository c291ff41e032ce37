package token

import "testing"

func TestFeedCapabilityIsNotABearer(t *testing.T) {
	id, tok, hash := NewFeed()
	got, err := FeedID(tok)
	if err != nil || got != id {
		t.Fatalf("FeedID = %q, %v; want %q", got, err, id)
	}
	if !Matches(tok, hash) {
		t.Fatal("hash does not match")
	}
	if _, err := ID(tok); err == nil {
		t.Fatal("a feed capability parsed as a bearer token")
	}
	_, bearer, _ := New()
	if _, err := FeedID(bearer); err == nil {
		t.Fatal("a bearer token parsed as a feed capability")
	}
}
