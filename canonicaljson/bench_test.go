package canonicaljson_test

import (
	"os"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
)

// benchDocs are real inputs: seed 000 as a whole (about 12 KiB of mixed
// JSON) and its signing vector's event core.
func benchDocs(b *testing.B) map[string][]byte {
	b.Helper()
	seed, err := os.ReadFile("../conformance/testdata/seeds/000_d18f2735a1feda05.txt")
	if err != nil {
		b.Fatal(err)
	}
	v, err := canonicaljson.Parse(seed)
	if err != nil {
		b.Fatal(err)
	}
	sv, _ := v.Get("signing_vector")
	core, _ := sv.Get("core")
	coreJSON, err := canonicaljson.Canonical(core)
	if err != nil {
		b.Fatal(err)
	}
	return map[string][]byte{"seed000": seed, "event-core": coreJSON}
}

func BenchmarkParse(b *testing.B) {
	for name, doc := range benchDocs(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := canonicaljson.Parse(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCanonical(b *testing.B) {
	for name, doc := range benchDocs(b) {
		v, err := canonicaljson.Parse(doc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 2*len(doc))
			for b.Loop() {
				if buf, err = canonicaljson.AppendCanonical(buf[:0], v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
