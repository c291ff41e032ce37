package correspondence_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/shareddir"
)

func TestSigningVector(t *testing.T) {
	for _, src := range vectorSources(t) {
		t.Run(src.name, func(t *testing.T) {
			sv := src.vf.SigningVector
			priv := ed25519.NewKeyFromSeed(mustHex(t, sv.PrivateSeedHex))
			pub, err := correspondence.DecodePublicKey(sv.PublicKeyB64URL)
			if err != nil {
				t.Fatal(err)
			}
			if !pub.Equal(priv.Public()) {
				t.Fatal("public key does not belong to the seed")
			}
			core := mustParse(t, sv.Core)
			signedValue := edit(t, core, "/signature", &canonicaljson.Value{Kind: canonicaljson.Object, Members: []canonicaljson.Member{
				{Name: "algorithm", Value: canonicaljson.StringValue("Ed25519")},
				{Name: "value_b64url", Value: canonicaljson.StringValue(sv.SignatureB64URL)},
			}})
			signedValue = edit(t, signedValue, "/event_id", str(sv.EventID))
			raw, err := canonicaljson.Canonical(signedValue)
			if err != nil {
				t.Fatal(err)
			}

			// Path 1: ParseEvent + Verify of the signed JSON.
			e, err := correspondence.ParseEvent(raw)
			if err != nil {
				t.Fatalf("ParseEvent: %v", err)
			}
			coreJCS, err := e.CoreJCS()
			if err != nil {
				t.Fatal(err)
			}
			if string(coreJCS) != sv.CoreJCS {
				t.Errorf("core_jcs differs\n got %s\nwant %s", coreJCS, sv.CoreJCS)
			}
			d := correspondence.SigningDigest(coreJCS)
			if got := hex.EncodeToString(d[:]); got != sv.SigningDigestHex {
				t.Errorf("signing digest = %s, want %s", got, sv.SigningDigestHex)
			}
			if err := e.Verify(pub); err != nil {
				t.Errorf("Verify: %v", err)
			}

			// Path 2: Sign reproduces signature and event id byte for byte.
			e.Signature, e.ID = "", ""
			if err := e.Sign(priv); err != nil {
				t.Fatal(err)
			}
			if e.Signature != sv.SignatureB64URL {
				t.Errorf("signature = %s, want %s", e.Signature, sv.SignatureB64URL)
			}
			if e.ID != sv.EventID {
				t.Errorf("event_id = %s, want %s", e.ID, sv.EventID)
			}
			out, err := e.CanonicalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != string(raw) {
				t.Errorf("re-serialized event differs from the signed JSON")
			}
		})
	}
}

type wycheproof struct {
	NumberOfTests int `json:"numberOfTests"`
	TestGroups    []struct {
		PublicKey struct {
			PK string `json:"pk"`
		} `json:"publicKey"`
		Tests []struct {
			TcID   int    `json:"tcId"`
			Msg    string `json:"msg"`
			Sig    string `json:"sig"`
			Result string `json:"result"`
		} `json:"tests"`
	} `json:"testGroups"`
}

// TestWycheproof runs every Ed25519 verify vector through the project's
// verify path: base64url public key and signature, the encoding check,
// then ed25519.Verify.
func TestWycheproof(t *testing.T) {
	data, err := os.ReadFile(shareddir.Path(t, "corpora", "ed25519", "ed25519_test.json"))
	if err != nil {
		t.Fatal(err)
	}
	var w wycheproof
	if err := json.Unmarshal(data, &w); err != nil {
		t.Fatal(err)
	}
	var total, valid, invalid, refusedEncoding int
	for _, g := range w.TestGroups {
		pub, err := correspondence.DecodePublicKey(base64.RawURLEncoding.EncodeToString(mustHex(t, g.PublicKey.PK)))
		if err != nil {
			t.Fatalf("public key: %v", err)
		}
		for _, tc := range g.Tests {
			total++
			sig := base64.RawURLEncoding.EncodeToString(mustHex(t, tc.Sig))
			got := false
			raw, err := correspondence.DecodeSignature(sig)
			if err != nil {
				refusedEncoding++
				if len(mustHex(t, tc.Sig)) == ed25519.SignatureSize {
					t.Errorf("tcId %d: 64-byte signature refused by the encoding check", tc.TcID)
				}
			} else {
				got = ed25519.Verify(pub, mustHex(t, tc.Msg), raw)
			}
			if want := tc.Result == "valid"; got != want {
				t.Errorf("tcId %d: verified = %v, want %v", tc.TcID, got, want)
			}
			if got {
				valid++
			} else {
				invalid++
			}
		}
	}
	if total != 151 || w.NumberOfTests != 151 || valid != 88 || invalid != 63 || refusedEncoding != 12 {
		t.Errorf("total=%d valid=%d invalid=%d refused by encoding=%d, want 151/88/63/12", total, valid, invalid, refusedEncoding)
	}
}

func TestRFC8032(t *testing.T) {
	data, err := os.ReadFile(shareddir.Path(t, "corpora", "ed25519", "rfc8032_7.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name, SecretKey, PublicKey, Message, Signature string
		} `json:"vectors"`
	}
	dec := json.NewDecoder(strings.NewReader(strings.NewReplacer(`"secret_key"`, `"SecretKey"`, `"public_key"`, `"PublicKey"`).Replace(string(data))))
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) != 5 {
		t.Fatalf("%d vectors, want 5", len(f.Vectors))
	}
	for _, v := range f.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			priv := ed25519.NewKeyFromSeed(mustHex(t, v.SecretKey))
			pub, err := correspondence.DecodePublicKey(base64.RawURLEncoding.EncodeToString(mustHex(t, v.PublicKey)))
			if err != nil || !pub.Equal(priv.Public()) {
				t.Fatalf("public key: %v", err)
			}
			msg := mustHex(t, v.Message)
			sigB64 := base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, msg))
			if want := base64.RawURLEncoding.EncodeToString(mustHex(t, v.Signature)); sigB64 != want {
				t.Fatalf("signature = %s, want %s", sigB64, want)
			}
			sig, err := correspondence.DecodeSignature(sigB64)
			if err != nil {
				t.Fatal(err)
			}
			if !ed25519.Verify(pub, msg, sig) {
				t.Error("does not verify")
			}
		})
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	pub := testKey(t).Public().(ed25519.PublicKey)
	raw, err := canonicaljson.Canonical(claimOpenEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	e, err := correspondence.ParseEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Verify(pub); err != nil {
		t.Fatalf("untouched event: %v", err)
	}
	// Flip one byte inside the body: claim_id 6666… → 6667… stays valid.
	flipped := strings.Replace(string(raw), `"claim_id":"66666666-`, `"claim_id":"66666667-`, 1)
	if flipped == string(raw) {
		t.Fatal("body byte not found")
	}
	fe, err := correspondence.ParseEvent([]byte(flipped))
	if err != nil {
		t.Fatal(err)
	}
	if err := fe.Verify(pub); !errors.Is(err, correspondence.ErrSignatureInvalid) {
		t.Errorf("flipped body byte: %v, want ErrSignatureInvalid", err)
	}
	wrongID := edit(t, mustParse(t, raw), "/event_id", str(eventID(7)))
	raw2, _ := canonicaljson.Canonical(wrongID)
	we, err := correspondence.ParseEvent(raw2)
	if err != nil {
		t.Fatal(err)
	}
	if err := we.Verify(pub); !errors.Is(err, correspondence.ErrEventIDMismatch) {
		t.Errorf("wrong event_id: %v, want ErrEventIDMismatch", err)
	}
	other := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	if err := e.Verify(other); !errors.Is(err, correspondence.ErrSignatureInvalid) {
		t.Errorf("other key: %v, want ErrSignatureInvalid", err)
	}
}
