//go:build !unix

package lease

import (
	"errors"
	"os"
)

var errNoLock = errors.New("file locks unsupported")

// tryLock cannot lock here: every process takes a fresh identity.
func tryLock(*os.File) (bool, error) { return false, errNoLock }
