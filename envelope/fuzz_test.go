package envelope_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/envelope"
)

// FuzzCanonicalize checks that Canonicalize never panics, refuses only with
// typed errors, and that an accepted envelope's canonical form is stable:
// it is its own RFC 8785 form, its hash is the SHA-256 of those bytes, and
// re-serializing the input (another member order, reversed predicates, no
// whitespace) gives the same bytes.
func FuzzCanonicalize(f *testing.F) {
	vectors, err := envelope.ParseVectors(readSeed(f))
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range vectors {
		f.Add([]byte(v.Envelope))
	}
	f.Add([]byte(doc(`[{"type":"record_count","value":"9007199254740991"},{"type":"region","value":"IE"}]`)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		canonical, hash, err := envelope.Canonicalize(raw)
		if err != nil {
			if !errors.Is(err, envelope.ErrRefused) && !errors.Is(err, canonicaljson.ErrProfile) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		again, err := canonicaljson.CanonicalizeBytes(canonical)
		if err != nil || !bytes.Equal(again, canonical) {
			t.Fatalf("canonical form is not its own JCS: %v", err)
		}
		if hash != envelope.Hash(canonical) {
			t.Fatal("hash is not the SHA-256 of the canonical bytes")
		}
		doc, err := canonicaljson.ParseObject(raw)
		if err != nil {
			t.Fatalf("accepted input fails the strict profile: %v", err)
		}
		// Reverse the top-level members and the predicates array.
		slices.Reverse(doc.Members)
		for i := range doc.Members {
			if doc.Members[i].Name == "predicates" {
				slices.Reverse(doc.Members[i].Value.Elems)
			}
		}
		shuffled, err := canonicaljson.Canonical(doc)
		if err != nil {
			t.Fatal(err)
		}
		c2, h2, err := envelope.Canonicalize(shuffled)
		if err != nil || h2 != hash || !bytes.Equal(c2, canonical) {
			t.Fatalf("re-serialized input canonicalizes differently: %v", err)
		}
	})
}
