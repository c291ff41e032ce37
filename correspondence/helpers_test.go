package correspondence_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/shareddir"
)

// seedPath is seed 000 as copied into the repository.
const seedPath = "../conformance/testdata/seeds/000_d18f2735a1feda05.txt"

type signingVector struct {
	PrivateSeedHex   string          `json:"private_seed_hex"`
	PublicKeyB64URL  string          `json:"public_key_b64url"`
	Core             json.RawMessage `json:"core"`
	CoreJCS          string          `json:"core_jcs"`
	SigningDigestHex string          `json:"signing_digest_hex"`
	SignatureB64URL  string          `json:"signature_b64url"`
	EventID          string          `json:"event_id"`
}

type kindBody struct {
	Kind   string          `json:"kind"`
	Body   json.RawMessage `json:"body"`
	Reason string          `json:"reason"`
}

type validityVector struct {
	Value string `json:"value"`
	Path  string `json:"path"`
	Valid bool   `json:"valid"`
}

type vectorFile struct {
	SigningVector      signingVector    `json:"signing_vector"`
	BodyMatrix         []kindBody       `json:"body_matrix"`
	InvalidBodyVectors []kindBody       `json:"invalid_body_vectors"`
	OpaqueIDVectors    []validityVector `json:"opaque_id_vectors"`
	LocatorVectors     []validityVector `json:"locator_vectors"`
	PathVectors        []validityVector `json:"path_vectors"`
}

func readVectorFile(tb testing.TB, path string) vectorFile {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(data, &vf); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return vf
}

// vectorSources are the two vector files: the public one (beside the
// spec) and seed 000 (in the repository).
func vectorSources(t *testing.T) []struct {
	name string
	vf   vectorFile
} {
	t.Helper()
	out := []struct {
		name string
		vf   vectorFile
	}{{"seed000", readVectorFile(t, seedPath)}}
	if d, err := shareddir.Find(); err == nil {
		out = append(out, struct {
			name string
			vf   vectorFile
		}{"public", readVectorFile(t, filepath.Join(d, "spec", "agent-correspondence-0.1-vectors.json"))})
	} else {
		t.Logf("public vector file not read: %v", err)
	}
	return out
}

func mustParse(tb testing.TB, data []byte) canonicaljson.Value {
	tb.Helper()
	v, err := canonicaljson.Parse(data)
	if err != nil {
		tb.Fatalf("parse: %v", err)
	}
	return v
}

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// testKey is the public TEST key of the signing vector (never for real
// identities).
func testKey(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	return ed25519.NewKeyFromSeed(mustHex(tb, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"))
}

func strp(s string) *string { return &s }

// baseEvent is the signing vector's event with another kind and body,
// signed with the test key.
func baseEvent(tb testing.TB, kind correspondence.Kind, body canonicaljson.Value, parents []string) *correspondence.Event {
	tb.Helper()
	e := &correspondence.Event{
		ProjectID:    "11111111-1111-4111-8111-111111111111",
		RepositoryID: "repo:github.com/cambridgetcg/agenttool",
		ThreadID:     "task:renaissance-correspondence",
		Sender: correspondence.Sender{
			IdentityID:   "22222222-2222-4222-8222-222222222222",
			SigningKeyID: "33333333-3333-4333-8333-333333333333",
			DeviceID:     "44444444-4444-4444-8444-444444444444",
			SessionID:    "55555555-5555-4555-8555-555555555555",
		},
		Kind:       kind,
		Parents:    append([]string{}, parents...),
		SessionSeq: 1,
		IssuedAt:   "2026-07-19T10:00:00.000Z",
		Scope: correspondence.Scope{
			BaseRevision: strp("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
			Branch:       strp("codex/renaissance-correspondence"),
			Paths:        []string{"docs", "docs/specs"},
		},
		Body: body,
	}
	if err := e.Sign(testKey(tb)); err != nil {
		tb.Fatal(err)
	}
	return e
}

// claimOpenEvent is the signing vector's own event as a Value.
func claimOpenEvent(tb testing.TB) canonicaljson.Value {
	tb.Helper()
	body := mustParse(tb, []byte(`{"claim_id":"66666666-6666-4666-8666-666666666666","generation":1,"expires_at":"2026-07-19T12:00:00.000Z"}`))
	return baseEvent(tb, correspondence.KindClaimOpen, body, nil).Value()
}

// clone deep-copies v so that a mutation never reaches a shared value.
func clone(v canonicaljson.Value) canonicaljson.Value {
	switch v.Kind {
	case canonicaljson.Array:
		elems := make([]canonicaljson.Value, len(v.Elems))
		for i := range v.Elems {
			elems[i] = clone(v.Elems[i])
		}
		v.Elems = elems
	case canonicaljson.Object:
		ms := make([]canonicaljson.Member, len(v.Members))
		for i := range v.Members {
			ms[i] = canonicaljson.Member{Name: v.Members[i].Name, Value: clone(v.Members[i].Value)}
		}
		v.Members = ms
	}
	return v
}

// edit returns a copy of v with the member or element at the RFC 6901
// pointer ptr set to nv (created when absent), or removed when nv is nil.
func edit(tb testing.TB, v canonicaljson.Value, ptr string, nv *canonicaljson.Value) canonicaljson.Value {
	tb.Helper()
	out := clone(v)
	toks := strings.Split(ptr, "/")[1:]
	cur := &out
	for k, tok := range toks {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		last := k == len(toks)-1
		switch cur.Kind {
		case canonicaljson.Object:
			idx := -1
			for i := range cur.Members {
				if cur.Members[i].Name == tok {
					idx = i
				}
			}
			if last {
				switch {
				case nv == nil && idx >= 0:
					cur.Members = append(cur.Members[:idx], cur.Members[idx+1:]...)
				case nv != nil && idx >= 0:
					cur.Members[idx].Value = *nv
				case nv != nil:
					cur.Members = append(cur.Members, canonicaljson.Member{Name: tok, Value: *nv})
				}
				return out
			}
			if idx < 0 {
				tb.Fatalf("edit %s: no member %s", ptr, tok)
			}
			cur = &cur.Members[idx].Value
		case canonicaljson.Array:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i > len(cur.Elems) {
				tb.Fatalf("edit %s: bad index %s", ptr, tok)
			}
			if last {
				switch {
				case nv == nil:
					cur.Elems = append(cur.Elems[:i], cur.Elems[i+1:]...)
				case i == len(cur.Elems):
					cur.Elems = append(cur.Elems, *nv)
				default:
					cur.Elems[i] = *nv
				}
				return out
			}
			cur = &cur.Elems[i]
		default:
			tb.Fatalf("edit %s: %s is not a container", ptr, tok)
		}
	}
	return out
}

func str(s string) *canonicaljson.Value {
	v := canonicaljson.StringValue(s)
	return &v
}

func num(i int64) *canonicaljson.Value {
	v := canonicaljson.IntValue(i)
	return &v
}

func null() *canonicaljson.Value {
	v := canonicaljson.NullValue()
	return &v
}

func strArray(ss ...string) *canonicaljson.Value {
	elems := make([]canonicaljson.Value, len(ss))
	for i, s := range ss {
		elems[i] = canonicaljson.StringValue(s)
	}
	v := canonicaljson.ArrayValue(elems...)
	return &v
}

// eventID returns a distinct valid event id for i.
func eventID(i int) string {
	return "sha256:" + strings.Repeat("0", 64-len(strconv.Itoa(i))) + strconv.Itoa(i)
}

func eventIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = eventID(i + 1)
	}
	return out
}

// hasIssue reports whether issues hold one at ptr with code.
func hasIssue(issues []correspondence.Issue, ptr, code string) bool {
	for _, is := range issues {
		if is.Pointer == ptr && is.Code == code {
			return true
		}
	}
	return false
}
