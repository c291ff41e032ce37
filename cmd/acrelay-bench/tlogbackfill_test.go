package main

import (
	"io"
	"testing"
	"time"
)

// TestTLogBackfillRuns: the backfill measurement seeds 2,500 records,
// integrates them from size 0 in three steps (pages of 1000; the head's
// size is checked inside) and fills every figure.
func TestTLogBackfillRuns(t *testing.T) {
	r, err := runTLogBackfill(t.Context(), tlogBackfillConfig{Records: 2500, Sample: time.Millisecond}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != 2500 || r.Steps != 3 || r.Seconds <= 0 || r.PerRecordUs <= 0 || r.SeedSeconds <= 0 ||
		r.HeapBeforeMiB <= 0 || r.GoPeakMiB < r.HeapPeakMiB {
		t.Fatalf("result %+v", r)
	}
	if _, err := runTLogBackfill(t.Context(), tlogBackfillConfig{Records: 0, Sample: time.Millisecond}, io.Discard); err == nil {
		t.Fatal("0 records accepted")
	}
}
