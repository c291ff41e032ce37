package shared

import (
	"fmt"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/store"
)

// ScopeOf returns the RFC 8785 bytes of a stored event's scope object
// (a claim's scope in store.ClaimsSnapshot). Errors: store.ErrUnavailable
// when the stored bytes are not an object with a scope.
func ScopeOf(canonical []byte) ([]byte, error) {
	v, err := canonicaljson.ParseObject(canonical)
	if err != nil {
		return nil, fmt.Errorf("stored event: %w", store.ErrUnavailable)
	}
	scope, ok := v.Get("scope")
	if !ok {
		return nil, fmt.Errorf("stored event without scope: %w", store.ErrUnavailable)
	}
	b, err := canonicaljson.Canonical(scope)
	if err != nil {
		return nil, fmt.Errorf("stored scope: %w", store.ErrUnavailable)
	}
	return b, nil
}
