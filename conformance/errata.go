package conformance

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acrelay/acrelay/correspondence"
)

// Erratum is a vector entry known to be damaged in its file. Entry names
// it (a vector name or the quoted value); Explanation says what was lost
// and what the runner checked instead (spec/correspondence-0.1.md §4,
// "Erratum in seed 000").
type Erratum struct {
	Entry       string
	Explanation string
}

// erratum counts a recognised damaged entry: as an erratum when err is
// nil (the rule the entry was meant to test holds), else as a failure
// that names the erratum.
func (g *Group) erratum(entry string, e knownErratum) {
	if err := e.check(); err != nil {
		g.fail("%s (known erratum): the corrected rule does not hold: %v", entry, err)
		return
	}
	g.Errata = append(g.Errata, Erratum{Entry: entry, Explanation: e.explanation})
}

// knownErratum is one damaged entry of seed 000: how to check the rule it
// was meant to test, and the explanation printed with it.
type knownErratum struct {
	explanation string
	check       func() error
}

// The path vector that seed 000 lost to Windows-1252 decoding: the byte
// 0x85 (U+0085 NEXT LINE, a Cc control, so an invalid path character) was
// read as U+2026 HORIZONTAL ELLIPSIS, a valid one, while the entry still
// says invalid.
const (
	damagedPath  = "packages/\u2026sdk-ts"
	originalPath = "packages/\u0085sdk-ts"
)

var pathErratum = knownErratum{
	explanation: `marked invalid, but U+2026 (HORIZONTAL ELLIPSIS) is a valid path character; ` +
		`the public vector file holds U+0085 (NEXT LINE, a Cc control) here, which Windows-1252 ` +
		`decoding turned into U+2026. Checked instead: the U+2026 path is VALID and the U+0085 path INVALID.`,
	check: func() error {
		if !correspondence.ValidPath(damagedPath) {
			return errors.New("the U+2026 path is refused; the rule of spec §4 admits it")
		}
		if correspondence.ValidPath(originalPath) {
			return errors.New("the U+0085 path is admitted; a Cc control is not a path character")
		}
		return nil
	},
}

// matchScalarErratum recognises the damaged path vector by its content:
// group path_vectors, the U+2026 path, marked invalid.
func matchScalarErratum(group, value string, valid bool) (knownErratum, bool) {
	if group == "path_vectors" && value == damagedPath && !valid {
		return pathErratum, true
	}
	return knownErratum{}, false
}

// The canonicalization vector whose NFD form seed 000 lost: its "nfd"
// string holds the precomposed U+00E9, like "nfc", so the entry no longer
// tests that strings are kept unnormalized. The public file holds
// "e" + U+0301 COMBINING ACUTE ACCENT.
const (
	nfcE = "\u00e9"
	nfdE = "e\u0301"
)

var nfdErratum = knownErratum{
	explanation: `its "nfd" string lost the decomposed form: both strings are the precomposed U+00E9, ` +
		`so the entry no longer tests that strings are kept unnormalized; the public vector file ` +
		`holds "e" + U+0301 there. Checked instead: the seed's value canonicalizes to the seed's jcs, ` +
		`and {"nfc":U+00E9,"nfd":"e"+U+0301} canonicalizes with both forms kept byte for byte.`,
	check: func() error {
		restored := `{"nfd":"` + nfdE + `","nfc":"` + nfcE + `"}`
		want := `{"nfc":"` + nfcE + `","nfd":"` + nfdE + `"}`
		if err := checkCanonicalization([]byte(restored), true, want); err != nil {
			return fmt.Errorf("restored NFD vector: %w", err)
		}
		return nil
	},
}

// matchCanonicalizationErratum recognises the damaged canonicalization
// vector by its content: named unicode-is-not-normalized, both strings the
// precomposed U+00E9. Its own expectation (the seed's jcs) is checked too.
func matchCanonicalizationErratum(v canonicalizationVector) (knownErratum, bool) {
	if v.Name != "unicode-is-not-normalized" {
		return knownErratum{}, false
	}
	var value struct {
		NFC string `json:"nfc"`
		NFD string `json:"nfd"`
	}
	if err := json.Unmarshal(v.Value, &value); err != nil || value.NFC != nfcE || value.NFD != nfcE {
		return knownErratum{}, false
	}
	e := nfdErratum
	e.check = func() error {
		if err := checkCanonicalization(v.Value, v.Valid, v.JCS); err != nil {
			return fmt.Errorf("the seed's own entry: %w", err)
		}
		return nfdErratum.check()
	}
	return e, true
}
