//go:build !linux

package sqlite

// gatherVFSRegistered reports no gathering VFS: it is built for Linux
// only (it reads the default VFS's file descriptor), and elsewhere the
// writer uses the default VFS.
func gatherVFSRegistered() (string, error) { return "", nil }
