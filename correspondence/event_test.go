package correspondence_test

import (
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// TestSignedFromCore checks that the spliced JCS(signed) used by Sign and
// Verify equals a full canonicalization, also when nested objects or
// strings contain the thread_id member pattern.
func TestSignedFromCore(t *testing.T) {
	cases := []struct {
		name, thread, body string
	}{
		{"plain", "task:x", `{"summary":"s"}`},
		{"pattern in thread_id", `x","thread_id":"y`, `{"summary":"s"}`},
		{"pattern in body string", "t", `{"summary":"a,\"thread_id\":\"b"}`},
		{"nested thread_id member", "t", `{"summary":"s","x":{"thread_id":"n","zz":1}}`},
		{"empty thread_id", "", `{}`},
		{"escapes in thread_id", "a\\b\u0001\"", `{}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := baseEvent(t, correspondence.KindIntent, mustParse(t, []byte(tc.body)), nil)
			e.ThreadID = tc.thread
			if err := e.Sign(testKey(t)); err != nil {
				t.Fatal(err)
			}
			full, err := e.SignedJCS()
			if err != nil {
				t.Fatal(err)
			}
			core, _ := e.CoreJCS()
			spliced := correspondence.AppendSignedFromCore(nil, core, e.Signature)
			if string(spliced) != string(full) {
				t.Fatalf("spliced differs\n got %s\nwant %s", spliced, full)
			}
			if id := correspondence.EventIDOf(full); id != e.ID {
				t.Errorf("Sign id %s, want %s", e.ID, id)
			}
			if _, err := canonicaljson.Parse(spliced); err != nil {
				t.Error(err)
			}
		})
	}
}
