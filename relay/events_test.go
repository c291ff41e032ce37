package relay_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
)

const (
	seedProject  = "11111111-1111-4111-8111-111111111111"
	seedIdentity = "22222222-2222-4222-8222-222222222222"
	seedKey      = "33333333-3333-4333-8333-333333333333"
	seedEventID  = "sha256:6f9d943746a1672f501eb762296654452fb1168a63c5996535f7616ebb8d28dd"
)

// seedSignedEvent is the seed 000 signing vector as a signed event: core +
// signature + event_id, in the seed's own member order.
func seedSignedEvent(t *testing.T) (body []byte, publicKey string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "conformance", "testdata", "seeds", "000_d18f2735a1feda05.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var seed struct {
		SigningVector struct {
			PublicKey string                     `json:"public_key_b64url"`
			Core      map[string]json.RawMessage `json:"core"`
			Signature string                     `json:"signature_b64url"`
			EventID   string                     `json:"event_id"`
		} `json:"signing_vector"`
	}
	if err := json.Unmarshal(raw, &seed); err != nil {
		t.Fatal(err)
	}
	sv := seed.SigningVector
	ev := map[string]any{"event_id": sv.EventID, "signature": map[string]string{"algorithm": "Ed25519", "value_b64url": sv.Signature}}
	for k, v := range sv.Core {
		ev[k] = v
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b, sv.PublicKey
}

// TestSeedSigningVectorEndToEnd registers the seed's public TEST key under
// the seed's ids (test only; never a default), posts the seed signing
// vector and finds it in JSON and Atom (issue: real input end to end).
func TestSeedSigningVectorEndToEnd(t *testing.T) {
	e := newEnv(t)
	body, pub := seedSignedEvent(t)
	_, tok := e.newProject(seedProject)
	mustStatus(t, e.do("POST", "/v1/admin/projects/"+seedProject+"/identities", tok, []byte(`{"identity_id":"`+seedIdentity+`"}`)), 201)
	r := e.do("POST", "/v1/admin/identities/"+seedIdentity+"/keys", tok, []byte(`{"signing_key_id":"`+seedKey+`","public_key_b64url":"`+pub+`"}`))
	mustStatus(t, r, 201)
	if got := string(r.Body); !strings.Contains(got, `"status":"active"`) {
		t.Fatalf("key answer %s", got)
	}

	r = e.do("POST", "/v1/correspondence/events", tok, body)
	mustStatus(t, r, 201)
	m := r.json(t)
	ev := m["event"].(map[string]any)
	if ev["event_id"] != seedEventID {
		t.Fatalf("event_id = %v, want %s", ev["event_id"], seedEventID)
	}
	rcpt := m["receipt"].(map[string]any)
	if rcpt["received_seq"] != "1" {
		t.Errorf("received_seq = %v, want \"1\"", rcpt["received_seq"])
	}
	if m["lineage_status"] != "valid" {
		t.Errorf("lineage_status = %v, want valid", m["lineage_status"])
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/vnd.agenttool.correspondence+json; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "private, no-store" {
		t.Errorf("POST Cache-Control = %q, want private, no-store", cc)
	}

	// Exact retry: 200 with the original receipt.
	r2 := e.do("POST", "/v1/correspondence/events", tok, body)
	mustStatus(t, r2, 200)
	if got := r2.json(t)["receipt"]; !jsonEqual(got, rcpt) {
		t.Errorf("retry receipt %v, want original %v", got, rcpt)
	}

	repo := "repo:github.com/cambridgetcg/agenttool"
	r = e.do("GET", "/v1/correspondence/events?repository_id="+repo, tok, nil)
	mustStatus(t, r, 200)
	page := r.json(t)
	evs := page["events"].([]any)
	if len(evs) != 1 || evs[0].(map[string]any)["event"].(map[string]any)["event_id"] != seedEventID {
		t.Fatalf("events page %s", r.Body)
	}
	if page["protocol"] != correspondence.Protocol || page["scope"] != "project_private" {
		t.Errorf("envelope %s", r.Body)
	}
	wantPage := map[string]any{"after": nil, "next_after": "1", "has_more": false}
	if !jsonEqual(page["page"], wantPage) {
		t.Errorf("page = %v, want %v", page["page"], wantPage)
	}

	r = e.do("GET", "/v1/correspondence/events?repository_id="+repo, tok, nil, "Accept", "application/atom+xml")
	mustStatus(t, r, 200)
	if !strings.Contains(string(r.Body), "<id>"+seedEventID+"</id>") {
		t.Fatalf("atom lacks the entry: %s", r.Body)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
