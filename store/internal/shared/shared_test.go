package shared

import (
	"testing"
	"time"
)

func TestTimeScan(t *testing.T) {
	want := time.Date(2026, 12, 6, 21, 30, 7, 123e6, time.UTC)
	east := time.FixedZone("east", 5*3600)
	for _, tc := range []struct {
		name string
		src  any
		want time.Time
	}{
		{"sqlite text", "2026-12-06T21:30:07.123Z", want},
		{"sqlite blob", []byte("2026-12-06T21:30:07.123Z"), want},
		{"timestamptz in another zone", want.In(east), want},
		{"NULL", nil, time.Time{}},
		{"empty text", "", time.Time{}},
		{"text in another layout", "2026-12-06 21:30:07", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Time{T: time.Unix(1, 0)} // overwritten on every path
			if err := got.Scan(tc.src); err != nil {
				t.Fatalf("Scan(%#v): %v", tc.src, err)
			}
			if !got.T.Equal(tc.want) || got.T.Location() != time.UTC {
				t.Errorf("Scan(%#v) = %v (%v), want %v UTC", tc.src, got.T, got.T.Location(), tc.want)
			}
			if v := TimeOf(tc.src); !v.Equal(tc.want) {
				t.Errorf("TimeOf(%#v) = %v, want %v", tc.src, v, tc.want)
			}
		})
	}
	var bad Time
	if err := bad.Scan(int64(7)); err == nil {
		t.Error("Scan(int64) = nil, want an error")
	}
}

func TestPage(t *testing.T) {
	rows := []int{1, 2, 3}
	if got, more := Page(rows, 3); len(got) != 3 || more {
		t.Errorf("Page(3 rows, 3) = %v, %v; want 3 rows, false", got, more)
	}
	if got, more := Page(rows, 2); len(got) != 2 || got[1] != 2 || !more {
		t.Errorf("Page(3 rows, 2) = %v, %v; want [1 2], true", got, more)
	}
	if got, more := Page([]int(nil), 5); len(got) != 0 || more {
		t.Errorf("Page(nil, 5) = %v, %v; want [], false", got, more)
	}
}

func TestCheckLimit(t *testing.T) {
	for _, tc := range []struct {
		limit int
		ok    bool
	}{{0, false}, {1, true}, {200, true}, {201, false}, {-1, false}} {
		err := CheckLimit("handoffs", tc.limit, 200)
		if (err == nil) != tc.ok {
			t.Errorf("CheckLimit(%d) = %v, want ok %v", tc.limit, err, tc.ok)
		}
	}
	if err := CheckLimit("handoffs", 0, 200); err.Error() != "handoffs: limit 0 outside 1–200" {
		t.Errorf("message %q", err)
	}
}
