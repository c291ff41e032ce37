package envelope

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acrelay/acrelay/canonicaljson"
)

// Vector is one case of the seed's vector file (seed
// 001_eade5896d07b0a7c): an acceptance case carries Canonical and Hash, a
// rejection case carries Rejects. Envelope holds the input bytes exactly as
// they appear in the seed.
type Vector struct {
	Name      string          `json:"name"`
	Why       string          `json:"why"`
	Envelope  json.RawMessage `json:"envelope"`
	Canonical *string         `json:"canonical"`
	Hash      string          `json:"hash"`
	Rejects   string          `json:"rejects"`
}

// Rejection reports whether v is a rejection case.
func (v Vector) Rejection() bool { return v.Canonical == nil }

// ParseVectors reads the vector file. The file itself is outside the strict
// profile (one rejection case is a fractional JSON number), so it is read
// with encoding/json and each envelope is kept as its raw bytes, which are
// what Canonicalize is then given.
func ParseVectors(seed []byte) ([]Vector, error) {
	var file struct {
		Vectors []Vector `json:"vectors"`
	}
	if err := json.Unmarshal(seed, &file); err != nil {
		return nil, fmt.Errorf("read envelope vectors: %w", err)
	}
	if len(file.Vectors) == 0 {
		return nil, errors.New("read envelope vectors: no vectors")
	}
	return file.Vectors, nil
}

// CheckVector runs one vector through Canonicalize. For an acceptance case
// it returns nil when the canonical bytes and the hash are exactly the
// expected ones; for a rejection case, when the envelope is refused (by
// the strict profile or an envelope rule: the seed makes refusal
// normative, not its wording). The error says what differed and never
// includes the envelope.
func CheckVector(v Vector) error {
	canonical, hash, err := Canonicalize(v.Envelope)
	if v.Rejection() {
		var re *RefusalError
		var pe *canonicaljson.ProfileError
		switch {
		case err == nil:
			return fmt.Errorf("%s: accepted (hash %s), must be refused", v.Name, hash)
		case !errors.As(err, &re) && !errors.As(err, &pe):
			return fmt.Errorf("%s: refused with an untyped error: %w", v.Name, err)
		}
		return nil
	}
	switch {
	case err != nil:
		return fmt.Errorf("%s: refused (%w), must be accepted", v.Name, err)
	case string(canonical) != *v.Canonical:
		return fmt.Errorf("%s: canonical bytes differ from the vector", v.Name)
	case hash != v.Hash:
		return fmt.Errorf("%s: hash %s, want %s", v.Name, hash, v.Hash)
	}
	return nil
}

// RunVectors runs every vector of the seed file and counts the results.
// failures holds one line per failed vector (or one line when the file
// cannot be read, counted as one failure). It is what the conformance
// package calls.
func RunVectors(seed []byte) (passed, failed int, failures []string) {
	vectors, err := ParseVectors(seed)
	if err != nil {
		return 0, 1, []string{err.Error()}
	}
	for _, v := range vectors {
		if err := CheckVector(v); err != nil {
			failed++
			failures = append(failures, err.Error())
			continue
		}
		passed++
	}
	return passed, failed, failures
}
