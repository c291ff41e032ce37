package handoff_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/handoff"
)

// FuzzValidate checks that Validate never panics, that it returns either a
// contract, issues, or a strict-profile error (never two of them), and that
// a valid contract's canonical form validates again to the same contract
// and the same bytes.
func FuzzValidate(f *testing.F) {
	f.Add(readFile(f, "testdata/valid.json"))
	f.Add(readFile(f, "testdata/minimal.json"))
	f.Add([]byte(`{"contractVersion":"1.0","handoffId":"x","state":"done","budget":{"maxAttempts":0}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, issues, err := handoff.Validate(raw)
		if err != nil {
			if !errors.Is(err, canonicaljson.ErrProfile) || issues != nil {
				t.Fatalf("error %v with issues %v", err, issues)
			}
			return
		}
		if issues != nil {
			for _, i := range issues {
				if i.Pointer != "" && i.Pointer[0] != '/' || i.Message == "" {
					t.Fatalf("malformed issue %q", i)
				}
			}
			return
		}
		b, err := c.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		again, issues, err := handoff.Validate(b)
		if err != nil || issues != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("canonical form does not validate to the same contract: %v %v", issues, err)
		}
		b2, err := again.Canonical()
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("canonical form is not stable: %v", err)
		}
		for _, s := range handoff.States {
			if next, err := handoff.Transition(c, string(s), &handoff.Result{EvidenceURIs: []string{"u"}}); err == nil {
				if ch := handoff.ChangedTerms(c, next); ch != nil {
					t.Fatalf("transition to %s changed terms %v", s, ch)
				}
			}
		}
	})
}
