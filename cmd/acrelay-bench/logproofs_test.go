package main

import (
	"io"
	"testing"
)

// TestLogProofsRuns: the log-proofs measurement runs end to end on a small
// SQLite log (every proof it times is checked inside; a failure is an
// error) and fills every figure.
func TestLogProofsRuns(t *testing.T) {
	r, err := runLogProofs(t.Context(), logProofsConfig{Records: 300, Requests: 50}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.Engine != "sqlite" || r.Records != 300 || r.Requests != 50 || r.ProofP50us <= 0 || r.ProofP99us < r.ProofP50us ||
		r.BoundP50us <= 0 || r.HandlerProofP50us <= 0 || r.HandlerBoundP99us < r.HandlerBoundP50us || r.RatioP99 <= 0 {
		t.Fatalf("result %+v", r)
	}
	if _, err := runLogProofs(t.Context(), logProofsConfig{Records: 0, Requests: 1}, io.Discard); err == nil {
		t.Fatal("0 records accepted")
	}
}
