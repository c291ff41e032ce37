package correspondence_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

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
