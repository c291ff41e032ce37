//go:build unix

package lease

import (
	"errors"
	"os"
	"syscall"
)

var errNoLock = errors.New("file locks unsupported")

// tryLock takes an exclusive flock on f without waiting; false when
// another open file description holds it. The kernel drops the lock when
// the process dies, however it dies.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
