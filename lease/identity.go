package lease

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// IdentityFile is the name of the file in the data directory that keeps a
// process's lease holder identity across restarts.
const IdentityFile = "lease-holder"

// Identity is a process's lease holder id. Reclaim is true when the id was
// its predecessor's (read from the data directory): the Keepers then
// reclaim that holder's live leases at start.
type Identity struct {
	ID      string
	Reclaim bool
	f       *os.File // locked while this process uses the identity; nil for a fresh one
}

// NewIdentity returns a fresh identity (no predecessor): host name and a
// random suffix.
func NewIdentity() *Identity { return &Identity{ID: freshID()} }

// OpenIdentity returns the holder identity kept in dir/IdentityFile,
// creating the file with a fresh id when it does not exist, and holds an
// exclusive lock on it (flock) until Close. When another live process
// holds the lock (two processes started on one data directory), it
// returns a fresh identity that reclaims nothing, so two live processes
// never share a holder id. dir "" also gives a fresh identity. Errors:
// the file cannot be created, read or written.
func OpenIdentity(dir string) (*Identity, error) {
	if dir == "" {
		return NewIdentity(), nil
	}
	f, err := os.OpenFile(filepath.Join(dir, IdentityFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lease identity: %w", err)
	}
	locked, err := tryLock(f)
	if err != nil || !locked {
		f.Close()
		if err != nil && !errors.Is(err, errNoLock) {
			return nil, fmt.Errorf("lease identity: lock: %w", err)
		}
		return NewIdentity(), nil // in use by a live process, or no file locks here
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lease identity: %w", err)
	}
	if id := strings.TrimSpace(string(b)); validID(id) {
		return &Identity{ID: id, Reclaim: true, f: f}, nil
	}
	id := freshID()
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(id+"\n"), 0)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lease identity: %w", err)
		}
	}
	return &Identity{ID: id, f: f}, nil
}

// Close releases the identity's lock; a process started next on the same
// data directory then takes the identity over.
func (i *Identity) Close() error {
	if i == nil || i.f == nil {
		return nil
	}
	err := i.f.Close()
	i.f = nil
	return err
}

func freshID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' {
			return -1
		}
		return r
	}, host)
	if len(host) > 64 {
		host = host[:64]
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%x", host, b)
}

// validID accepts what freshID writes: printable ASCII, 1 to 100 bytes.
func validID(id string) bool {
	if id == "" || len(id) > 100 {
		return false
	}
	for _, r := range id {
		if r <= ' ' || r > '~' {
			return false
		}
	}
	return true
}
