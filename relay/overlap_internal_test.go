package relay

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// bruteOverlaps is the definition: every pair, every path pair, §4 rule.
func bruteOverlaps(claims []store.ActiveClaim) ([]wire.Overlap, bool) {
	sorted := slices.Clone(claims)
	slices.SortFunc(sorted, func(a, b store.ActiveClaim) int { return strings.Compare(a.EventID, b.EventID) })
	rows := []wire.Overlap{}
	more := false
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			var paths []string
			for _, a := range sorted[i].Paths {
				for _, b := range sorted[j].Paths {
					if !correspondence.PathsOverlap(a, b) {
						continue
					}
					switch {
					case a == ".":
						paths = append(paths, a)
					case b == ".":
						paths = append(paths, b)
					case len(a) <= len(b):
						paths = append(paths, a)
					default:
						paths = append(paths, b)
					}
				}
			}
			slices.Sort(paths)
			paths = slices.Compact(paths)
			if len(paths) == 0 {
				continue
			}
			if len(rows) == maxOverlaps {
				return rows, true
			}
			if len(paths) > maxOverlapPaths {
				paths, more = paths[:maxOverlapPaths], true
			}
			rows = append(rows, wire.Overlap{LeftEventID: sorted[i].EventID, RightEventID: sorted[j].EventID, Paths: paths})
		}
	}
	return rows, more
}

func TestOverlappingClaimsMatchesDefinition(t *testing.T) {
	segs := []string{"a", "b", "sdk", "sdk-old", "src"}
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 3000; iter++ {
		n := 1 + r.IntN(12)
		claims := make([]store.ActiveClaim, n)
		for i := range claims {
			m := 1 + r.IntN(5)
			seen := map[string]bool{}
			for len(claims[i].Paths) < m {
				var p string
				if r.IntN(15) == 0 {
					p = "."
				} else {
					depth := 1 + r.IntN(3)
					parts := make([]string, depth)
					for d := range parts {
						parts[d] = segs[r.IntN(len(segs))]
					}
					p = strings.Join(parts, "/")
				}
				if !seen[p] {
					seen[p] = true
					claims[i].Paths = append(claims[i].Paths, p)
				}
			}
			claims[i].EventID = fmt.Sprintf("sha256:%064x", r.Uint64())
		}
		gotRows, gotMore := overlappingClaims(claims)
		wantRows, wantMore := bruteOverlaps(claims)
		if !reflect.DeepEqual(gotRows, wantRows) || gotMore != wantMore {
			t.Fatalf("claims %+v\n got %+v %v\nwant %+v %v", claims, gotRows, gotMore, wantRows, wantMore)
		}
	}
}

func BenchmarkOverlappingClaimsWorstCase(b *testing.B) {
	claims := make([]store.ActiveClaim, 128)
	for i := range claims {
		claims[i].EventID = fmt.Sprintf("sha256:%064d", i)
		for p := 0; p < 64; p++ {
			claims[i].Paths = append(claims[i].Paths, fmt.Sprintf("c%d/p%d/%s", i, p, strings.Repeat("x", 180)))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		overlappingClaims(claims)
	}
}
