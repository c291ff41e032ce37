package e2ee

import "errors"

// ErrNotBuilt: the binary has no Matrix encryption (built without -tags goolm).
var ErrNotBuilt = errors.New("this acrelay was built without Matrix end-to-end encryption (build with -tags goolm)")
