package logwitness

import (
	"errors"
	"strings"
	"testing"
)

// litewitnessKey is a verifier key in the form litewitness prints (C2SP
// cosignature/v1, type 0x04): the key of seed 0x09…09 named
// witness.example/w1, as fnote.VKeyToCosignatureV1 writes it.
const litewitnessKey = "witness.example/w1+24b5d9fe+BP0XJDhaoMdbZPt4zWAvodmR/ev3axPFjtcC6sg16fYY"

func TestParseWitness(t *testing.T) {
	w, err := ParseWitness(litewitnessKey + " http://127.0.0.1:7380/")
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "witness.example/w1" || w.URL != "http://127.0.0.1:7380" || w.AddCheckpointURL() != "http://127.0.0.1:7380/add-checkpoint" ||
		w.VerifierKey != litewitnessKey || w.Verifier.KeyHash() != 0x24b5d9fe {
		t.Fatalf("%+v", w)
	}
	if w, err := ParseWitness("  " + litewitnessKey + " https://w.example/sub/prefix  "); err != nil || w.URL != "https://w.example/sub/prefix" {
		t.Fatalf("%+v %v", w, err)
	}
	for _, tc := range []struct{ name, in, says string }{
		{"no url", litewitnessKey, ""},
		{"empty", "", ""},
		{"two urls", litewitnessKey + " http://a http://b", ""},
		{"ed25519 note key", "witness.example/w1+6327c7cb+Af0XJDhaoMdbZPt4zWAvodmR/ev3axPFjtcC6sg16fYY http://w.example", "0x01"},
		{"wrong hash", "witness.example/w1+24b5d9ff+BP0XJDhaoMdbZPt4zWAvodmR/ev3axPFjtcC6sg16fYY http://w.example", "does not match"},
		{"short key", "witness.example/w1+24b5d9fe+BP0X http://w.example", "hash or key"},
		{"ftp", litewitnessKey + " ftp://w.example", "http(s)"},
		{"credentials", litewitnessKey + " https://u:p@w.example", "http(s)"},
		{"query", litewitnessKey + " https://w.example/?q=1", "http(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWitness(tc.in)
			if !errors.Is(err, ErrBadWitness) || !strings.Contains(err.Error(), tc.says) || (strings.Contains(tc.in, "u:p") && strings.Contains(err.Error(), "u:p")) {
				t.Fatalf("ParseWitness(%q) = %v", tc.in, err)
			}
		})
	}
}

func FuzzParseWitness(f *testing.F) {
	f.Add(litewitnessKey + " http://127.0.0.1:7380/")
	f.Add("a+00000000+BA== http://x")
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ParseWitness(s)
		if err != nil {
			if !errors.Is(err, ErrBadWitness) {
				t.Fatalf("error %v is not ErrBadWitness", err)
			}
			return
		}
		if w.Verifier == nil || w.Name == "" || strings.HasSuffix(w.URL, "/") || !strings.HasPrefix(w.URL, "http") {
			t.Fatalf("parsed %q as %+v", s, w)
		}
	})
}
