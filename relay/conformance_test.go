package relay_test

import (
	"context"
	"testing"

	"github.com/acrelay/acrelay/conformance"
)

// TestBlackBoxConformance points the black-box HTTP suite (which speaks
// HTTP only) at this relay, on whichever store the test env uses.
func TestBlackBoxConformance(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	rep := conformance.RunHTTP(context.Background(), e.url, tok)
	if rep.Failed() != 0 || rep.Passed() < 50 {
		for _, g := range rep.Groups {
			for _, f := range g.Failures {
				t.Errorf("%s: %s", g.Title(), f)
			}
		}
		t.Fatalf("conformance: %d passed, %d failed", rep.Passed(), rep.Failed())
	}
	t.Logf("conformance over HTTP: %d passed, 0 failed", rep.Passed())
}
