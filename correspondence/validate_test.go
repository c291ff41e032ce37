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
	"time"

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

// referencedIDs collects the event ids a body vector references.
func referencedIDs(body canonicaljson.Value) []string {
	var ids []string
	for _, m := range body.Members {
		switch m.Name {
		case "predecessor_event_id", "target_event_id":
			ids = append(ids, m.Value.Str)
		case "target_event_ids":
			for _, e := range m.Value.Elems {
				ids = append(ids, e.Str)
			}
		}
	}
	return ids
}

func TestBodyMatrix(t *testing.T) {
	for _, src := range vectorSources(t) {
		t.Run(src.name, func(t *testing.T) {
			if len(src.vf.BodyMatrix) != 21 {
				t.Fatalf("body_matrix has %d entries, want 21", len(src.vf.BodyMatrix))
			}
			seen := map[correspondence.Kind]bool{}
			pub := testKey(t).Public().(ed25519.PublicKey)
			for _, bm := range src.vf.BodyMatrix {
				t.Run(bm.Kind, func(t *testing.T) {
					body := mustParse(t, bm.Body)
					refs := referencedIDs(body)
					e := baseEvent(t, correspondence.Kind(bm.Kind), body, refs)
					raw, err := e.CanonicalJSON()
					if err != nil {
						t.Fatal(err)
					}
					got, err := correspondence.ParseEvent(raw)
					if err != nil {
						t.Fatalf("refused: %v %+v", err, issuesOf(err))
					}
					if err := got.Verify(pub); err != nil {
						t.Errorf("Verify: %v", err)
					}
					if g := got.ReferencedEventIDs(); strings.Join(g, ",") != strings.Join(refs, ",") {
						t.Errorf("ReferencedEventIDs = %v, want %v", g, refs)
					}
					// Without its parents, a referencing body is refused at /parents.
					if len(refs) > 0 {
						issues := correspondence.Validate(edit(t, e.Value(), "/parents", strArray()))
						if len(issues) != 1 || !hasIssue(issues, "/parents", "reference_not_in_parents") {
							t.Errorf("without parents: %+v", issues)
						}
					}
					seen[correspondence.Kind(bm.Kind)] = true
				})
			}
			for _, k := range correspondence.Kinds {
				if !seen[k] {
					t.Errorf("kind %s not accepted by the matrix", k)
				}
			}
		})
	}
}

func issuesOf(err error) []correspondence.Issue {
	var ve *correspondence.ValidationError
	if errors.As(err, &ve) {
		return ve.Issues
	}
	return nil
}

func TestInvalidBodyVectors(t *testing.T) {
	for _, src := range vectorSources(t) {
		t.Run(src.name, func(t *testing.T) {
			if len(src.vf.InvalidBodyVectors) != 5 {
				t.Fatalf("invalid_body_vectors has %d entries, want 5", len(src.vf.InvalidBodyVectors))
			}
			for _, ib := range src.vf.InvalidBodyVectors {
				t.Run(ib.Reason, func(t *testing.T) {
					body := mustParse(t, ib.Body)
					e := baseEvent(t, correspondence.Kind(ib.Kind), body, referencedIDs(body))
					issues := correspondence.Validate(e.Value())
					if len(issues) != 1 || issues[0].Code != ib.Reason || !strings.HasPrefix(issues[0].Pointer, "/body") {
						t.Errorf("issues = %+v, want exactly one %s under /body", issues, ib.Reason)
					}
					raw, _ := e.CanonicalJSON()
					_, err := correspondence.ParseEvent(raw)
					var ve *correspondence.ValidationError
					if !errors.As(err, &ve) || ve.Code != correspondence.CodeEventInvalid {
						t.Errorf("ParseEvent error = %v, want event_invalid", err)
					}
				})
			}
		})
	}
}

// The seed's path vector at index 9 lost its U+0085 to Windows-1252
// decoding (spec §4 Erratum): it reads U+2026, which is a valid path
// character; the public file's U+0085 is a Cc control and invalid.
const seedPathErratum = "packages/\u2026sdk-ts"

func TestScalarVectors(t *testing.T) {
	for _, src := range vectorSources(t) {
		t.Run(src.name, func(t *testing.T) {
			counts := [3]int{len(src.vf.OpaqueIDVectors), len(src.vf.LocatorVectors), len(src.vf.PathVectors)}
			if counts != [3]int{4, 8, 11} {
				t.Fatalf("vector counts = %v, want [4 8 11]", counts)
			}
			for _, v := range src.vf.OpaqueIDVectors {
				if got := correspondence.ValidOpaqueID(v.Value); got != v.Valid {
					t.Errorf("ValidOpaqueID(%q) = %v, want %v", v.Value, got, v.Valid)
				}
			}
			for _, v := range src.vf.LocatorVectors {
				if got := correspondence.ValidLocator(v.Value); got != v.Valid {
					t.Errorf("ValidLocator(%q) = %v, want %v", v.Value, got, v.Valid)
				}
			}
			errata := 0
			for _, v := range src.vf.PathVectors {
				got := correspondence.ValidPath(v.Path)
				if src.name == "seed000" && v.Path == seedPathErratum {
					errata++
					if !got || v.Valid {
						t.Errorf("erratum entry: ValidPath = %v (want true), seed says %v (known false)", got, v.Valid)
					}
					continue
				}
				if got != v.Valid {
					t.Errorf("ValidPath(%q) = %v, want %v", v.Path, got, v.Valid)
				}
			}
			if want := map[string]int{"seed000": 1, "public": 0}[src.name]; errata != want {
				t.Errorf("errata = %d, want %d", errata, want)
			}
		})
	}
	if correspondence.ValidPath("packages/\u0085sdk-ts") {
		t.Error("U+0085 (Cc) admitted in a path")
	}
	if !correspondence.ValidPath(seedPathErratum) {
		t.Error("U+2026 refused in a path")
	}
}

func TestValidPath(t *testing.T) {
	cases := []struct {
		name, path string
		valid      bool
	}{
		{"dot", ".", true},
		{"plain", "a", true},
		{"nested", "a/b/c", true},
		{"three dots segment", "a/.../b", true},
		{"dot prefix name", ".github/workflows", true},
		{"space", "my docs/a b", true},
		{"unicode", "docs/\u00e9t\u00e9/\U0001F600", true},
		{"empty", "", false},
		{"dot segment", "a/./b", false},
		{"leading dot segment", "./a", false},
		{"trailing dotdot", "a/..", false},
		{"dotdot alone", "..", false},
		{"trailing slash", "a/", false},
		{"slash alone", "/", false},
		{"star", "a*", false},
		{"question", "a?", false},
		{"brackets", "a[b]", false},
		{"close bracket", "a]", false},
		{"brace", "a}", false},
		{"tab", "a\tb", false},
		{"del", "a\x7fb", false},
		{"c1 control", "a\u009fb", false},
		{"256 scalars", strings.Repeat("\u00e9", 256), true},
		{"257 scalars", strings.Repeat("\u00e9", 257), false},
		{"256 with segments", strings.Repeat("abc/", 63) + "abcd", true},
		{"invalid utf8", "a\xffb", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := correspondence.ValidPath(tc.path); got != tc.valid {
				t.Errorf("ValidPath = %v, want %v", got, tc.valid)
			}
		})
	}
}

func TestPathsOverlap(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{".", "anything", true},
		{"x/y", ".", true},
		{".", ".", true},
		{"packages/sdk", "packages/sdk", true},
		{"packages/sdk", "packages/sdk/src", true},
		{"packages/sdk/src/a", "packages/sdk", true},
		{"packages/sdk", "packages/sdk-old", false},
		{"packages/sdk", "packages/sdkx/src", false},
		{"packages/sdk", "packages", true},
		{"Packages", "packages", false},
		{"a", "b", false},
		{"a/b", "a/c", false},
	}
	for _, tc := range cases {
		t.Run(tc.a+"|"+tc.b, func(t *testing.T) {
			if got := correspondence.PathsOverlap(tc.a, tc.b); got != tc.want {
				t.Errorf("PathsOverlap = %v, want %v", got, tc.want)
			}
			if got := correspondence.PathsOverlap(tc.b, tc.a); got != tc.want {
				t.Errorf("PathsOverlap reversed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidOpaqueIDAndLocator(t *testing.T) {
	opaque := []struct {
		name, s string
		valid   bool
	}{
		{"ascii", "repo:x", true},
		{"256", strings.Repeat("\u00e9", 256), true},
		{"257", strings.Repeat("\u00e9", 257), false},
		{"empty", "", false},
		{"nbsp", "a\u00a0b", false},
		{"ideographic space", "a\u3000b", false},
		{"line separator", "a\u2028b", false},
		{"zwnbsp", "\ufeffa", false},
		{"tab", "a\tb", false},
		{"del", "a\x7f", false},
		{"non-space format char", "a\u200bb", true},
		{"astral", "\U0001F600", true},
	}
	for _, tc := range opaque {
		t.Run("opaque/"+tc.name, func(t *testing.T) {
			if got := correspondence.ValidOpaqueID(tc.s); got != tc.valid {
				t.Errorf("ValidOpaqueID = %v, want %v", got, tc.valid)
			}
		})
	}
	locators := []struct {
		name, s string
		valid   bool
	}{
		{"scheme chars", "a+b.c-d:x", true},
		{"2048", "x:" + strings.Repeat("a", 2046), true},
		{"2049", "x:" + strings.Repeat("a", 2047), false},
		{"empty", "", false},
		{"colon first", ":x", false},
		{"bad scheme char", "a_b:x", false},
		{"nbsp", "x:a\u00a0b", false},
		{"unicode ok", "x:\u00e9", true},
	}
	for _, tc := range locators {
		t.Run("locator/"+tc.name, func(t *testing.T) {
			if got := correspondence.ValidLocator(tc.s); got != tc.valid {
				t.Errorf("ValidLocator = %v, want %v", got, tc.valid)
			}
		})
	}
	uuids := []struct {
		s     string
		valid bool
	}{
		{"11111111-1111-4111-8111-111111111111", true},
		{"00000000-0000-0000-0000-000000000000", true},
		{"11111111-1111-4111-8111-11111111111A", false},
		{"11111111111141118111111111111111", false},
		{"{11111111-1111-4111-8111-111111111111}", false},
		{"11111111-1111-4111-8111_111111111111", false},
		{"11111111-1111-4111-8111-11111111111", false},
	}
	for _, tc := range uuids {
		if got := correspondence.ValidUUID(tc.s); got != tc.valid {
			t.Errorf("ValidUUID(%q) = %v, want %v", tc.s, got, tc.valid)
		}
	}
}

func TestParseTimestamp(t *testing.T) {
	cases := []struct {
		name, s, code string
	}{
		{"ok", "2026-07-19T10:00:00.000Z", ""},
		{"29 feb leap year", "2024-02-29T00:00:00.000Z", ""},
		{"29 feb 2000", "2000-02-29T12:00:00.000Z", ""},
		{"29 feb 2023", "2023-02-29T00:00:00.000Z", "timestamp_invalid_date"},
		{"29 feb 1900", "1900-02-29T00:00:00.000Z", "timestamp_invalid_date"},
		{"30 feb", "2024-02-30T00:00:00.000Z", "timestamp_invalid_date"},
		{"31 apr", "2024-04-31T00:00:00.000Z", "timestamp_invalid_date"},
		{"month 13", "2024-13-01T00:00:00.000Z", "timestamp_invalid_date"},
		{"month 0", "2024-00-01T00:00:00.000Z", "timestamp_invalid_date"},
		{"day 0", "2024-01-00T00:00:00.000Z", "timestamp_invalid_date"},
		{"year 0001", "0001-01-01T00:00:00.000Z", ""},
		{"year 9999", "9999-12-31T23:59:59.999Z", ""},
		{"year 0000", "0000-01-01T00:00:00.000Z", "timestamp_year_zero_not_admitted"},
		{"24:00", "2024-01-01T24:00:00.000Z", "timestamp_hour_24_not_admitted"},
		{"hour 25", "2024-01-01T25:00:00.000Z", "timestamp_invalid_time"},
		{"minute 60", "2024-01-01T23:60:00.000Z", "timestamp_invalid_time"},
		{"leap second", "2016-12-31T23:59:60.000Z", "timestamp_leap_second_not_admitted"},
		{"second 61", "2016-12-31T23:59:61.000Z", "timestamp_invalid_time"},
		{"no ms", "2026-07-19T12:00:00Z", "timestamp_requires_milliseconds"},
		{"no ms no zone", "2026-07-19T12:00:00", "timestamp_requires_milliseconds"},
		{"no ms offset", "2026-07-19T12:00:00+01:00", "timestamp_requires_milliseconds"},
		{"one digit fraction", "2026-07-19T12:00:00.5Z", "timestamp_fraction_not_milliseconds"},
		{"micro", "2026-07-19T12:00:00.000000Z", "timestamp_fraction_not_milliseconds"},
		{"empty fraction", "2026-07-19T12:00:00.Z", "timestamp_invalid"},
		{"offset plus", "2026-07-19T12:00:00.000+01:00", "timestamp_offset_not_admitted"},
		{"offset zero", "2026-07-19T12:00:00.000+00:00", "timestamp_offset_not_admitted"},
		{"offset minus", "2026-07-19T12:00:00.000-00:00", "timestamp_offset_not_admitted"},
		{"lowercase z", "2026-07-19T12:00:00.000z", "timestamp_requires_uppercase_z"},
		{"no zone", "2026-07-19T12:00:00.000", "timestamp_invalid"},
		{"lowercase t", "2026-07-19t12:00:00.000Z", "timestamp_invalid"},
		{"space", "2026-07-19 12:00:00.000Z", "timestamp_invalid"},
		{"trailing", "2026-07-19T12:00:00.000Zx", "timestamp_invalid"},
		{"five digit year", "12026-07-19T12:00:00.000Z", "timestamp_invalid"},
		{"unicode digit", "２026-07-19T12:00:00.000Z", "timestamp_invalid"},
		{"empty", "", "timestamp_invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tm, code := correspondence.ParseTimestamp(tc.s)
			if code != tc.code {
				t.Fatalf("code = %q, want %q", code, tc.code)
			}
			if code == "" {
				if got := correspondence.FormatTimestamp(tm); got != tc.s {
					t.Errorf("round trip = %s", got)
				}
			} else if !tm.IsZero() {
				t.Errorf("time not zero on failure")
			}
			// The same rule applies to issued_at inside an event.
			issues := correspondence.Validate(edit(t, claimOpenEvent(t), "/issued_at", str(tc.s)))
			if tc.code == "" && issues != nil || tc.code != "" && !hasIssue(issues, "/issued_at", tc.code) {
				t.Errorf("issued_at issues = %+v", issues)
			}
		})
	}
	want := time.Date(2024, 2, 29, 13, 14, 15, 678e6, time.UTC)
	if tm, _ := correspondence.ParseTimestamp("2024-02-29T13:14:15.678Z"); !tm.Equal(want) {
		t.Errorf("parsed %v, want %v", tm, want)
	}
	if got := correspondence.FormatTimestamp(time.Date(2024, 2, 29, 14, 14, 15, 678999999, time.FixedZone("x", 3600))); got != "2024-02-29T13:14:15.678Z" {
		t.Errorf("FormatTimestamp = %s", got)
	}
}

func TestSignatureEncoding(t *testing.T) {
	good := "y93m-gQISK5PUEqjF4bLZ_k6FCNX1lpeCENJegoNFRD-g3Eid0iyh0NLdmAvId_FPf94HURfatd1qB5Jyjq0Cg"
	cases := []struct {
		name, sig string
		ok        bool
	}{
		{"vector", good, true},
		{"last Q", good[:85] + "Q", true},
		{"last w", good[:85] + "w", true},
		{"last A", good[:85] + "A", true},
		{"last B", good[:85] + "B", false},
		{"last h", good[:85] + "h", false},
		{"padded", good + "==", false},
		{"85 chars", good[:85], false},
		{"87 chars", good + "A", false},
		{"plus", "+" + good[1:], false},
		{"slash", good[:40] + "/" + good[41:], false},
		{"space", good[:40] + " " + good[41:], false},
		{"std alphabet", base64.RawStdEncoding.EncodeToString(make([]byte, 63)) + "+w", false},
		{"empty", "", false},
	}
	pub := testKey(t).Public().(ed25519.PublicKey)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := correspondence.DecodeSignature(tc.sig)
			if (err == nil) != tc.ok {
				t.Errorf("DecodeSignature err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, correspondence.ErrSignatureEncoding) {
				t.Errorf("err = %v, want ErrSignatureEncoding", err)
			}
			ev := edit(t, claimOpenEvent(t), "/signature/value_b64url", str(tc.sig))
			issues := correspondence.Validate(ev)
			if tc.ok {
				if issues != nil {
					t.Errorf("issues = %+v", issues)
				}
				raw, _ := canonicaljson.Canonical(ev)
				e, err := correspondence.ParseEvent(raw)
				if err != nil {
					t.Fatal(err)
				}
				if tc.sig != good && !errors.Is(e.Verify(pub), correspondence.ErrSignatureInvalid) {
					t.Errorf("altered signature verified")
				}
				return
			}
			if len(issues) != 1 || !hasIssue(issues, "/signature/value_b64url", "signature_encoding_invalid") {
				t.Errorf("issues = %+v", issues)
			}
			raw, _ := canonicaljson.Canonical(ev)
			_, err = correspondence.ParseEvent(raw)
			var ve *correspondence.ValidationError
			if !errors.As(err, &ve) || ve.Code != correspondence.CodeSignatureEncodingInvalid {
				t.Errorf("ParseEvent err = %v, want signature_encoding_invalid", err)
			}
		})
	}
	// A signature problem next to another problem is event_invalid.
	ev := edit(t, edit(t, claimOpenEvent(t), "/signature/value_b64url", str(good[:85])), "/session_seq", num(0))
	raw, _ := canonicaljson.Canonical(ev)
	_, err := correspondence.ParseEvent(raw)
	var ve *correspondence.ValidationError
	if !errors.As(err, &ve) || ve.Code != correspondence.CodeEventInvalid || len(ve.Issues) != 2 {
		t.Errorf("mixed problems: %v %+v", err, issuesOf(err))
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

func TestMultipleIssues(t *testing.T) {
	ev := claimOpenEvent(t)
	ev = edit(t, ev, "/session_seq", num(0))
	ev = edit(t, ev, "/scope/paths/1", str("docs/../x"))
	ev = edit(t, ev, "/body/generation", str("1"))
	ev = edit(t, ev, "/extra", null())
	issues := correspondence.Validate(ev)
	want := []correspondence.Issue{
		{Pointer: "/session_seq", Code: "session_seq_out_of_range"},
		{Pointer: "/scope/paths/1", Code: "path_invalid"},
		{Pointer: "/body/generation", Code: "invalid_type"},
		{Pointer: "/extra", Code: "unknown_field"},
	}
	if len(issues) != len(want) {
		t.Fatalf("issues = %+v", issues)
	}
	for i, w := range want {
		if issues[i].Pointer != w.Pointer || issues[i].Code != w.Code || issues[i].Message == "" {
			t.Errorf("issue %d = %+v, want %s %s", i, issues[i], w.Pointer, w.Code)
		}
	}
}

// TestRules covers every rule of spec §3–§5 and every bound at both edges.
// Each case edits the valid claim.open event (or a body of another kind)
// and expects no issue (ptr == "") or exactly the listed issue.
func TestRules(t *testing.T) {
	base := claimOpenEvent(t)
	type change struct {
		ptr string
		v   *canonicaljson.Value // nil deletes
	}
	ids16 := eventIDs(16)
	ids17 := eventIDs(17)
	paths64 := make([]string, 64)
	for i := range paths64 {
		paths64[i] = "p" + eventID(i)[7:]
	}
	withKind := func(kind string, body string, parents ...string) []change {
		b := mustParse(t, []byte(body))
		if parents == nil {
			parents = []string{}
		}
		return []change{{"/kind", str(kind)}, {"/body", &b}, {"/parents", strArray(parents...)}}
	}
	text := func(n int) string { return strings.Repeat("\u00e9", n) }
	jsonText := func(n int) string { return `"` + text(n) + `"` }
	a, b := eventID(1), eventID(2)
	cases := []struct {
		name    string
		changes []change
		ptr     string
		code    string
	}{
		{"valid", nil, "", ""},
		{"not an object", []change{}, "", ""},
		{"protocol", []change{{"/protocol", str("agent-correspondence/v0.2")}}, "/protocol", "protocol_invalid"},
		{"protocol type", []change{{"/protocol", num(1)}}, "/protocol", "invalid_type"},
		{"protocol missing", []change{{"/protocol", nil}}, "/protocol", "required"},
		{"event_id upper", []change{{"/event_id", str(strings.ToUpper(a))}}, "/event_id", "event_id_invalid"},
		{"event_id short", []change{{"/event_id", str(a[:70])}}, "/event_id", "event_id_invalid"},
		{"event_id missing", []change{{"/event_id", nil}}, "/event_id", "required"},
		{"project_id upper", []change{{"/project_id", str("AAAAAAAA-1111-4111-8111-111111111111")}}, "/project_id", "uuid_invalid"},
		{"repository_id 256", []change{{"/repository_id", str(text(256))}}, "", ""},
		{"repository_id 257", []change{{"/repository_id", str(text(257))}}, "/repository_id", "length_out_of_range"},
		{"repository_id empty", []change{{"/repository_id", str("")}}, "/repository_id", "length_out_of_range"},
		{"repository_id space", []change{{"/repository_id", str("a b")}}, "/repository_id", "opaque_id_invalid"},
		{"thread_id 256", []change{{"/thread_id", str(strings.Repeat("t", 256))}}, "", ""},
		{"thread_id 257", []change{{"/thread_id", str(strings.Repeat("t", 257))}}, "/thread_id", "length_out_of_range"},
		{"thread_id bom", []change{{"/thread_id", str("t\ufeff")}}, "/thread_id", "opaque_id_invalid"},
		{"sender uuid", []change{{"/sender/device_id", str("x")}}, "/sender/device_id", "uuid_invalid"},
		{"sender missing member", []change{{"/sender/session_id", nil}}, "/sender/session_id", "required"},
		{"sender unknown member", []change{{"/sender/key", str("x")}}, "/sender/key", "unknown_field"},
		{"sender not object", []change{{"/sender", str("x")}}, "/sender", "invalid_type"},
		{"kind unknown", []change{{"/kind", str("claim.steal")}}, "/kind", "kind_invalid"},
		{"kind type", []change{{"/kind", num(3)}}, "/kind", "invalid_type"},
		{"parents 16", []change{{"/parents", strArray(ids16...)}}, "", ""},
		{"parents 17", []change{{"/parents", strArray(ids17...)}}, "/parents", "item_count_out_of_range"},
		{"parents duplicate", []change{{"/parents", strArray(a, b, a)}}, "/parents/2", "duplicate_item"},
		{"parents bad id", []change{{"/parents", strArray("sha256:x")}}, "/parents/0", "event_id_invalid"},
		{"parents not array", []change{{"/parents", str(a)}}, "/parents", "invalid_type"},
		{"session_seq max", []change{{"/session_seq", num(canonicaljson.MaxSafeInteger)}}, "", ""},
		{"session_seq 0", []change{{"/session_seq", num(0)}}, "/session_seq", "session_seq_out_of_range"},
		{"session_seq negative", []change{{"/session_seq", num(-1)}}, "/session_seq", "session_seq_out_of_range"},
		{"session_seq string", []change{{"/session_seq", str("1")}}, "/session_seq", "invalid_type"},
		{"issued_at no ms", []change{{"/issued_at", str("2026-07-19T10:00:00Z")}}, "/issued_at", "timestamp_requires_milliseconds"},
		{"base_revision null", []change{{"/scope/base_revision", null()}}, "", ""},
		{"base_revision 64", []change{{"/scope/base_revision", str(strings.Repeat("b", 64))}}, "", ""},
		{"base_revision 41", []change{{"/scope/base_revision", str(strings.Repeat("b", 41))}}, "/scope/base_revision", "git_revision_invalid"},
		{"base_revision upper", []change{{"/scope/base_revision", str(strings.Repeat("B", 40))}}, "/scope/base_revision", "git_revision_invalid"},
		{"base_revision missing", []change{{"/scope/base_revision", nil}}, "/scope/base_revision", "required"},
		{"branch null", []change{{"/scope/branch", null()}}, "", ""},
		{"branch 255", []change{{"/scope/branch", str(text(255))}}, "", ""},
		{"branch 256", []change{{"/scope/branch", str(text(256))}}, "/scope/branch", "length_out_of_range"},
		{"branch empty", []change{{"/scope/branch", str("")}}, "/scope/branch", "length_out_of_range"},
		{"branch space ok", []change{{"/scope/branch", str("a b\u00a0c")}}, "", ""},
		{"branch control", []change{{"/scope/branch", str("a\nb")}}, "/scope/branch", "branch_invalid"},
		{"branch missing", []change{{"/scope/branch", nil}}, "/scope/branch", "required"},
		{"paths 64", []change{{"/scope/paths", strArray(paths64...)}}, "", ""},
		{"paths 65", []change{{"/scope/paths", strArray(append(paths64, "extra")...)}}, "/scope/paths", "item_count_out_of_range"},
		{"paths empty", []change{{"/scope/paths", strArray()}}, "/scope/paths", "item_count_out_of_range"},
		{"paths duplicate", []change{{"/scope/paths", strArray("a", "a")}}, "/scope/paths/1", "duplicate_item"},
		{"path 256", []change{{"/scope/paths", strArray(text(256))}}, "", ""},
		{"path 257", []change{{"/scope/paths", strArray(text(257))}}, "/scope/paths/0", "length_out_of_range"},
		{"path glob", []change{{"/scope/paths", strArray("a/*")}}, "/scope/paths/0", "path_invalid"},
		{"scope unknown", []change{{"/scope/x", null()}}, "/scope/x", "unknown_field"},
		{"body not object", []change{{"/body", strArray()}}, "/body", "invalid_type"},
		{"authority action", []change{{"/authority/automatic_action", str("always")}}, "/authority/automatic_action", "authority_invalid"},
		{"authority grants", []change{{"/authority/grants", strArray("x")}}, "/authority/grants", "authority_invalid"},
		{"authority extra", []change{{"/authority/note", str("x")}}, "/authority/note", "unknown_field"},
		{"authority missing", []change{{"/authority", nil}}, "/authority", "required"},
		{"signature algorithm", []change{{"/signature/algorithm", str("ed25519")}}, "/signature/algorithm", "signature_algorithm_invalid"},
		{"signature extra", []change{{"/signature/key_id", str("x")}}, "/signature/key_id", "unknown_field"},
		{"signature missing", []change{{"/signature", nil}}, "/signature", "required"},
		{"signature value type", []change{{"/signature/value_b64url", num(1)}}, "/signature/value_b64url", "signature_encoding_invalid"},
		{"unknown top-level", []change{{"/x~0y~1z", null()}}, "/x~0y~1z", "unknown_field"},
		{"unknown body member", []change{{"/body/note", str("x")}}, "/body/note", "unknown_body_field"},
		{"open generation 2", []change{{"/body/generation", num(2)}}, "/body/generation", "open_generation_must_be_one"},
		{"open generation string", []change{{"/body/generation", str("1")}}, "/body/generation", "invalid_type"},
		{"open expires_at missing", []change{{"/body/expires_at", nil}}, "/body/expires_at", "expires_at_required"},
		{"open claim_id", []change{{"/body/claim_id", str("x")}}, "/body/claim_id", "uuid_invalid"},
		{"renew generation 1", withKind("claim.renew", `{"claim_id":"66666666-6666-4666-8666-666666666666","generation":1,"predecessor_event_id":"`+a+`","expires_at":"2026-07-19T14:00:00.000Z"}`, a), "/body/generation", "generation_out_of_range"},
		{"renew generation max", withKind("claim.renew", `{"claim_id":"66666666-6666-4666-8666-666666666666","generation":9007199254740991,"predecessor_event_id":"`+a+`","expires_at":"2026-07-19T14:00:00.000Z"}`, a), "", ""},
		{"renew predecessor not in parents", withKind("claim.renew", `{"claim_id":"66666666-6666-4666-8666-666666666666","generation":2,"predecessor_event_id":"`+a+`","expires_at":"2026-07-19T14:00:00.000Z"}`, b), "/parents", "reference_not_in_parents"},
		{"release detail", withKind("claim.release", `{"claim_id":"66666666-6666-4666-8666-666666666666","generation":3,"predecessor_event_id":"`+a+`","detail":"done"}`, a), "", ""},
		{"release with expires_at", withKind("claim.release", `{"claim_id":"66666666-6666-4666-8666-666666666666","generation":3,"predecessor_event_id":"`+a+`","expires_at":"2026-07-19T14:00:00.000Z"}`, a), "/body/expires_at", "unknown_body_field"},
		{"summary 1000", withKind("intent", `{"summary":`+jsonText(1000)+`}`), "", ""},
		{"summary 1001", withKind("intent", `{"summary":`+jsonText(1001)+`}`), "/body/summary", "length_out_of_range"},
		{"summary empty", withKind("progress", `{"summary":""}`), "/body/summary", "length_out_of_range"},
		{"summary missing", withKind("observation", `{}`), "/body/summary", "summary_required"},
		{"summary newline ok", withKind("intent", `{"summary":"a\nb\r\n\u0001"}`), "", ""},
		{"detail 1001", withKind("ack.seen", `{"target_event_id":"`+a+`","detail":`+jsonText(1001)+`}`, a), "/body/detail", "length_out_of_range"},
		{"next_safe_action 1000", withKind("handoff", `{"summary":"s","next_safe_action":`+jsonText(1000)+`}`), "", ""},
		{"next_safe_action 1001", withKind("handoff", `{"summary":"s","next_safe_action":`+jsonText(1001)+`}`), "/body/next_safe_action", "length_out_of_range"},
		{"handoff summary 2000", withKind("handoff", `{"summary":`+jsonText(2000)+`,"next_safe_action":"n"}`), "", ""},
		{"handoff summary 2001", withKind("handoff", `{"summary":`+jsonText(2001)+`,"next_safe_action":"n"}`), "/body/summary", "length_out_of_range"},
		{"handoff_id", withKind("handoff", `{"summary":"s","next_safe_action":"n","handoff_id":"x"}`), "/body/handoff_id", "uuid_invalid"},
		{"handoff missing next", withKind("handoff", `{"summary":"s"}`), "/body/next_safe_action", "next_safe_action_required"},
		{"raise 2", withKind("conflict.raise", `{"target_event_ids":["`+a+`","`+b+`"]}`, a, b), "", ""},
		{"raise 1", withKind("conflict.raise", `{"target_event_ids":["`+a+`"]}`, a), "/body/target_event_ids", "item_count_out_of_range"},
		{"raise 16", withKind("conflict.raise", `{"target_event_ids":["`+strings.Join(ids16, `","`)+`"]}`, ids16...), "", ""},
		{"raise 17", withKind("conflict.raise", `{"target_event_ids":["`+strings.Join(ids17, `","`)+`"]}`, ids16...), "", "multi"},
		{"resolve 1", withKind("conflict.resolve", `{"target_event_ids":["`+a+`"],"summary":"s"}`, a), "", ""},
		{"resolve 0", withKind("conflict.resolve", `{"target_event_ids":[],"summary":"s"}`), "/body/target_event_ids", "item_count_out_of_range"},
		{"resolve 16", withKind("conflict.resolve", `{"target_event_ids":["`+strings.Join(ids16, `","`)+`"],"summary":"s"}`, ids16...), "", ""},
		{"resolve duplicate", withKind("conflict.resolve", `{"target_event_ids":["`+a+`","`+a+`"],"summary":"s"}`, a), "/body/target_event_ids/1", "duplicate_item"},
		{"resolve result_revision", withKind("conflict.resolve", `{"target_event_ids":["`+a+`"],"summary":"s","result_revision":"x"}`, a), "/body/result_revision", "git_revision_invalid"},
		{"repair 17", withKind("repair", `{"target_event_ids":["`+strings.Join(ids17, `","`)+`"],"summary":"s"}`, ids16...), "", "multi"},
		{"repair missing summary", withKind("repair", `{"target_event_ids":["`+a+`"]}`, a), "/body/summary", "summary_required"},
		{"ack.applied 64 hex", withKind("ack.applied", `{"target_event_id":"`+a+`","result_revision":"`+strings.Repeat("c", 64)+`"}`, a), "", ""},
		{"ack.applied missing revision", withKind("ack.applied", `{"target_event_id":"`+a+`"}`, a), "/body/result_revision", "result_revision_required"},
		{"ack target missing", withKind("ack.rejected", `{}`), "/body/target_event_id", "target_event_id_required"},
		{"resume target not in parents", withKind("resume", `{"target_event_id":"`+a+`"}`), "/parents", "reference_not_in_parents"},
		{"refusal target", withKind("refusal", `{"target_event_id":"`+a+`","detail":"no"}`, a), "", ""},
		{"refusal target not in parents", withKind("refusal", `{"target_event_id":"`+a+`"}`), "/parents", "reference_not_in_parents"},
		{"pause until null", withKind("pause", `{"until":null}`), "", ""},
		{"rest until", withKind("rest", `{"until":"2026-07-19T12:00:00.000Z","detail":"lunch"}`), "", ""},
		{"rest until offset", withKind("rest", `{"until":"2026-07-19T12:00:00.000+02:00"}`), "/body/until", "timestamp_offset_not_admitted"},
		{"pause until number", withKind("pause", `{"until":0}`), "/body/until", "invalid_type"},
		{"close summary", withKind("close", `{"summary":"bye"}`), "", ""},
		{"close unknown", withKind("close", `{"reason":"x"}`), "/body/reason", "unknown_body_field"},
		{"artifact patch", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"`+a+`","locator":"https://x.test/p"},"summary":"s"}`), "", ""},
		{"artifact content", withKind("artifact.offer", `{"artifact":{"kind":"content_digest","digest":"`+a+`"}}`), "", ""},
		{"artifact commit 64", withKind("artifact.offer", `{"artifact":{"kind":"git_commit","revision":"`+strings.Repeat("d", 64)+`"}}`), "", ""},
		{"artifact commit with digest", withKind("artifact.offer", `{"artifact":{"kind":"git_commit","revision":"`+strings.Repeat("d", 40)+`","digest":"`+a+`"}}`), "/body/artifact/digest", "unknown_body_field"},
		{"artifact patch with revision", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"`+a+`","revision":"`+strings.Repeat("d", 40)+`"}}`), "/body/artifact/revision", "unknown_body_field"},
		{"artifact kind", withKind("artifact.offer", `{"artifact":{"kind":"tarball","digest":"`+a+`"}}`), "/body/artifact/kind", "artifact_kind_invalid"},
		{"artifact no kind", withKind("artifact.offer", `{"artifact":{"digest":"`+a+`"}}`), "/body/artifact/kind", "kind_required"},
		{"artifact digest", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"sha1:abc"}}`), "/body/artifact/digest", "digest_invalid"},
		{"artifact missing digest", withKind("artifact.offer", `{"artifact":{"kind":"git_patch"}}`), "/body/artifact/digest", "digest_required"},
		{"artifact locator relative", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"`+a+`","locator":"a/b"}}`), "/body/artifact/locator", "locator_invalid"},
		{"artifact locator 2048", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"`+a+`","locator":"x:`+strings.Repeat("a", 2046)+`"}}`), "", ""},
		{"artifact locator 2049", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"`+a+`","locator":"x:`+strings.Repeat("a", 2047)+`"}}`), "/body/artifact/locator", "length_out_of_range"},
		{"artifact missing", withKind("artifact.offer", `{"summary":"s"}`), "/body/artifact", "artifact_required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := base
			if tc.name == "not an object" {
				issues := correspondence.Validate(canonicaljson.ArrayValue())
				if len(issues) != 1 || issues[0].Pointer != "" || issues[0].Code != "invalid_type" {
					t.Errorf("issues = %+v", issues)
				}
				return
			}
			for _, c := range tc.changes {
				ev = edit(t, ev, c.ptr, c.v)
			}
			issues := correspondence.Validate(ev)
			switch {
			case tc.code == "":
				if issues != nil {
					t.Errorf("issues = %+v, want none", issues)
				}
			case tc.code == "multi":
				if len(issues) < 2 {
					t.Errorf("issues = %+v, want several", issues)
				}
			default:
				if len(issues) != 1 || issues[0].Pointer != tc.ptr || issues[0].Code != tc.code {
					t.Errorf("issues = %+v, want exactly %s %s", issues, tc.ptr, tc.code)
				}
			}
			for _, is := range issues {
				if is.Message == "" || strings.Contains(is.Message, "\u00e9") {
					t.Errorf("bad message %+v", is)
				}
			}
			// ParseEvent agrees with Validate.
			raw, err := canonicaljson.Canonical(ev)
			if err != nil {
				t.Fatal(err)
			}
			_, perr := correspondence.ParseEvent(raw)
			if (perr == nil) != (issues == nil) {
				t.Errorf("ParseEvent err = %v, Validate issues = %d", perr, len(issues))
			}
		})
	}
}

func TestTypedAccessors(t *testing.T) {
	a, b := eventID(1), eventID(2)
	body := mustParse(t, []byte(`{"claim_id":"66666666-6666-4666-8666-666666666666","generation":4,"predecessor_event_id":"`+a+`","expires_at":"2026-07-19T14:00:00.000Z"}`))
	raw, _ := baseEvent(t, correspondence.KindClaimRenew, body, []string{b, a}).CanonicalJSON()
	e, err := correspondence.ParseEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := e.Claim()
	want := correspondence.ClaimFields{ClaimID: "66666666-6666-4666-8666-666666666666", Generation: 4, PredecessorEventID: a, ExpiresAt: "2026-07-19T14:00:00.000Z"}
	if !ok || c != want {
		t.Errorf("Claim = %+v %v", c, ok)
	}
	if got := e.ReferencedEventIDs(); len(got) != 1 || got[0] != a {
		t.Errorf("ReferencedEventIDs = %v", got)
	}
	if e.HandoffID() != "" || len(e.Parents) != 2 || e.Parents[0] != b || e.SessionSeq != 1 ||
		*e.Scope.Branch != "codex/renaissance-correspondence" || e.Scope.Paths[1] != "docs/specs" ||
		e.Sender.SigningKeyID != "33333333-3333-4333-8333-333333333333" || e.IssuedAt != "2026-07-19T10:00:00.000Z" {
		t.Errorf("typed event = %+v", e)
	}
	hb := mustParse(t, []byte(`{"summary":"s","next_safe_action":"n","handoff_id":"77777777-7777-4777-8777-777777777777"}`))
	raw, _ = baseEvent(t, correspondence.KindHandoff, hb, nil).CanonicalJSON()
	h, err := correspondence.ParseEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if h.HandoffID() != "77777777-7777-4777-8777-777777777777" || h.ReferencedEventIDs() != nil {
		t.Errorf("handoff accessors: %q %v", h.HandoffID(), h.ReferencedEventIDs())
	}
	if _, ok := h.Claim(); ok {
		t.Error("Claim ok for handoff")
	}
	nb := canonicaljson.NullValue()
	raw, _ = canonicaljson.Canonical(edit(t, h.Value(), "/scope/base_revision", &nb))
	if n, err := correspondence.ParseEvent(raw); err != nil || n.Scope.BaseRevision != nil {
		t.Errorf("null base_revision: %v", err)
	}
}

func TestParseEventProfileError(t *testing.T) {
	for _, in := range []string{`{"a":1,"a":2}`, `[]`, `{"n":1.5}`, ``} {
		_, err := correspondence.ParseEvent([]byte(in))
		var pe *canonicaljson.ProfileError
		if !errors.As(err, &pe) {
			t.Errorf("ParseEvent(%q) err = %v, want ProfileError", in, err)
		}
	}
	_, err := correspondence.ParseEvent([]byte(`{}`))
	var ve *correspondence.ValidationError
	if !errors.As(err, &ve) || ve.Code != "event_invalid" || len(ve.Issues) != 14 {
		t.Errorf("empty object: %v, %d issues", err, len(issuesOf(err)))
	}
}
