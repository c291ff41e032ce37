package relay_test

import (
	"bytes"
	"strings"
	"testing"
)

// TestPostIngestErrorBodies pins the exact answer bytes of every refusal
// that ingest decides (the relay only translates them in errors.go): the
// status, the code, the message and the hint, byte for byte.
func TestPostIngestErrorBodies(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	otherPID, _ := e.newProject("")
	a := e.newAgent(pid, tok)
	other := e.newAgent(pid, tok)

	forged := a.intent("repo-e", "forged")
	forged.Signature = other.intent("repo-e", "x").Signature
	badID := a.intent("repo-e", "bad id")
	badID.ID = "sha256:" + strings.Repeat("0", 64)
	wrongProject := a.intent("repo-e", "p")
	wrongProject.ProjectID = otherPID
	_ = wrongProject.Sign(a.Priv)
	borrowed := a.intent("repo-e", "borrowed")
	borrowed.Sender.SigningKeyID = other.KeyID
	_ = borrowed.Sign(other.Priv)
	unknownKey := a.intent("repo-e", "unknown key")
	unknownKey.Sender.SigningKeyID = newUUID()
	_ = unknownKey.Sign(a.Priv)
	big := append([]byte(`{"pad":"`), bytes.Repeat([]byte("a"), 65536)...)
	big = append(big, `"}`...)

	notActive := `{"error":"sender_or_signing_key_not_active","message":"the sender identity or signing key is not active in this project"}`
	cases := []struct {
		name   string
		body   []byte
		status int
		want   string
	}{
		{"project mismatch", eventJSON(t, wrongProject), 403,
			`{"error":"project_mismatch","message":"project_id is not the project of the bearer token"}`},
		{"unknown signing key", eventJSON(t, unknownKey), 403, notActive},
		{"key of another identity", eventJSON(t, borrowed), 403, notActive},
		{"forged signature", eventJSON(t, forged), 403,
			`{"error":"signature_invalid","message":"the signature does not verify under the sender's signing key"}`},
		{"event id mismatch", eventJSON(t, badID), 400,
			`{"error":"event_id_mismatch","message":"event_id does not match the signed event","hint":"event_id = sha256: + hex(SHA-256(JCS(event without event_id)))"}`},
		{"too large", big, 413,
			`{"error":"body_too_large","message":"the request body exceeds this route's size limit","hint":"events and envelopes: 65536 bytes; contracts: 262144; admin bodies: 16384"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/v1/correspondence/events", tok, tc.body)
			mustStatus(t, r, tc.status)
			if string(r.Body) != tc.want {
				t.Fatalf("body %s\nwant %s", r.Body, tc.want)
			}
		})
	}

	t.Run("revoked key", func(t *testing.T) {
		b := e.newAgent(pid, tok)
		mustStatus(t, e.post(b, b.intent("repo-e", "before")), 201)
		mustStatus(t, e.do("POST", "/v1/admin/keys/"+b.KeyID+"/revoke", tok, nil), 200)
		r := e.post(b, b.intent("repo-e", "after"))
		mustStatus(t, r, 403)
		if string(r.Body) != notActive {
			t.Fatalf("body %s\nwant %s", r.Body, notActive)
		}
	})
}
