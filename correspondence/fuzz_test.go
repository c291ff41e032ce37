package correspondence_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/shareddir"
)

// fuzzSeeds are signed events of every kind from both vector files, the
// invalid bodies, and a few damaged variants.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	add := func(e *correspondence.Event) {
		raw, err := e.CanonicalJSON()
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, raw)
	}
	files := []string{seedPath}
	if d, err := shareddir.Find(); err == nil {
		files = append(files, filepath.Join(d, "spec", "agent-correspondence-0.1-vectors.json"))
	}
	for _, file := range files {
		vf := readVectorFile(f, file)
		for _, kb := range append(vf.BodyMatrix, vf.InvalidBodyVectors...) {
			body := mustParse(f, kb.Body)
			add(baseEvent(f, correspondence.Kind(kb.Kind), body, referencedIDs(body)))
		}
	}
	raw, _ := canonicaljson.Canonical(claimOpenEvent(f))
	seeds = append(seeds, raw,
		[]byte(strings.Replace(string(raw), `"generation":1`, `"generation":"1"`, 1)),
		[]byte(strings.Replace(string(raw), `.000Z`, `Z`, 1)),
		[]byte(strings.Replace(string(raw), `"docs"`, `"docs/../x"`, 1)),
		[]byte(`{}`), []byte(`[]`), []byte(`{"kind":"intent","body":{"summary":""}}`))
	return seeds
}

// FuzzParseEvent: ParseEvent never panics and agrees with Validate; an
// accepted event re-serialized through CanonicalJSON is exactly the
// canonical form of the input and re-parses to the same bytes.
func FuzzParseEvent(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	pub := testKey(f).Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := correspondence.ParseEvent(data)
		v, perr := canonicaljson.ParseObject(data)
		if perr != nil {
			var pe *canonicaljson.ProfileError
			if !errors.As(err, &pe) {
				t.Fatalf("profile refusal not reported as ProfileError: %v", err)
			}
			return
		}
		issues := correspondence.Validate(v)
		if err != nil {
			var ve *correspondence.ValidationError
			if !errors.As(err, &ve) || issues == nil || len(ve.Issues) != len(issues) {
				t.Fatalf("ParseEvent err %v disagrees with %d issues", err, len(issues))
			}
			for _, is := range issues {
				if is.Code == "" || is.Message == "" || is.Pointer != "" && is.Pointer[0] != '/' {
					t.Fatalf("malformed issue %+v", is)
				}
			}
			return
		}
		if issues != nil {
			t.Fatalf("ParseEvent accepted an event with %d issues", len(issues))
		}
		out, err := e.CanonicalJSON()
		if err != nil {
			t.Fatalf("CanonicalJSON: %v", err)
		}
		want, _ := canonicaljson.Canonical(v)
		if !bytes.Equal(out, want) {
			t.Fatalf("typed event loses or changes members\n got %s\nwant %s", out, want)
		}
		e2, err := correspondence.ParseEvent(out)
		if err != nil {
			t.Fatalf("re-serialized event refused: %v", err)
		}
		out2, _ := e2.CanonicalJSON()
		if !bytes.Equal(out, out2) {
			t.Fatal("re-parse changes the canonical bytes")
		}
		// VerifyCanonical agrees with Verify, and its bytes are CanonicalJSON's
		// (the seeds are signed with the test key, so both outcomes occur).
		verr := e.Verify(pub)
		vc, vcerr := e.VerifyCanonical(pub)
		if !errors.Is(vcerr, verr) && (verr == nil || vcerr == nil || vcerr.Error() != verr.Error()) {
			t.Fatalf("VerifyCanonical err %v, Verify err %v", vcerr, verr)
		}
		if vcerr == nil && !bytes.Equal(vc, out) {
			t.Fatalf("VerifyCanonical bytes differ from CanonicalJSON\n got %s\nwant %s", vc, out)
		}
		_, _ = e.Claim()
		_ = e.ReferencedEventIDs()
		_ = e.HandoffID()
	})
}
