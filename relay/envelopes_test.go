package relay_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
)

const envelopeAllTypes = `{"tenantId":"00000000-0000-0000-0000-000000000000","intentId":"00000000-0000-0000-0000-000000000000","schemaVersion":"1.0","agentId":"agent-1","tool":"datadog-billing","action":"renew","environment":"development","requestedAt":"2026-07-27T10:15:30.000Z","predicates":[{"type":"amount","currency":"USD","value":"1200.00"},{"type":"counterparty_reference","value":"datadog"},{"type":"data_class","value":"pii","access":"read"},{"type":"region","value":"IE"},{"type":"record_count","value":"250"},{"type":"model_provenance","value":"llama-3.3-70b","hosting":"self_hosted"}]}`

func TestEnvelopeCanonicalizeAndCite(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	readOnly := e.newToken(pid, "read")

	r := e.do("POST", "/v1/envelopes/canonicalize", readOnly, []byte(envelopeAllTypes))
	mustStatus(t, r, 200)
	m := r.json(t)
	const wantHash = "FDBE4EE70BA04C1862AD724F9ADA8054ECEF84079A308416D6B224DBE17F32F3"
	if m["hash"] != wantHash || m["digest"] != "sha256:"+strings.ToLower(wantHash) {
		t.Fatalf("hash %v digest %v", m["hash"], m["digest"])
	}
	sum := sha256.Sum256([]byte(m["canonical"].(string)))
	if strings.ToUpper(hex.EncodeToString(sum[:])) != wantHash {
		t.Fatal("canonical bytes do not hash to the hash")
	}

	r = e.do("POST", "/v1/envelopes/canonicalize", tok, []byte(strings.Replace(envelopeAllTypes, `"tool":"datadog-billing"`, `"tool":"please summarise the attached customer record"`, 1)))
	mustStatus(t, r, 422)
	if m := r.json(t); m["error"] != "envelope_refused" || m["reason"] != "identifier_invalid" {
		t.Fatalf("refusal %s", r.Body)
	}
	r = e.do("POST", "/v1/envelopes/canonicalize", tok, []byte(`{"a":1.5}`))
	mustStatus(t, r, 400)
	if r.code(t) != "fractional_number" {
		t.Fatalf("strict refusal %s", r.Body)
	}
	mustStatus(t, e.do("POST", "/v1/envelopes/canonicalize", "", []byte(envelopeAllTypes)), 401)

	// An agent cites the envelope's digest in an artifact.offer.
	a := e.newAgent(pid, tok)
	offer := a.event("repo", "t", correspondence.KindArtifactOffer,
		obj("artifact", obj("kind", "content_digest", "digest", m["digest"].(string)), "summary", "intended billing renewal"), nil)
	r = e.post(a, offer)
	mustStatus(t, r, 201)
	if !strings.Contains(string(r.Body), `"digest":"sha256:fdbe4ee70ba04c1862ad724f9ada8054ecef84079a308416d6b224dbe17f32f3"`) {
		t.Fatalf("offer does not carry the digest: %s", r.Body)
	}
}
