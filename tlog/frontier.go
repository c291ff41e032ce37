package tlog

import "golang.org/x/mod/sumdb/tlog"

// Frontier computes a tree's root from its leaf hashes in one pass and
// O(log n) memory (the roots of its perfect subtrees, RFC 9162 §2.1.1):
// for checking a stored tree against its records without holding either.
// The zero Frontier is the empty tree.
type Frontier struct {
	size   int64
	hashes []tlog.Hash // perfect-subtree roots, largest (leftmost) first
}

// Append adds the next leaf, given its hash (tlog.RecordHash of its bytes).
func (f *Frontier) Append(leafHash tlog.Hash) {
	f.hashes = append(f.hashes, leafHash)
	// Each trailing 1 bit of the old size is a perfect subtree of the
	// new leaf's height: merge them.
	for s := f.size; s&1 == 1; s >>= 1 {
		n := len(f.hashes)
		f.hashes = append(f.hashes[:n-2], tlog.NodeHash(f.hashes[n-2], f.hashes[n-1]))
	}
	f.size++
}

// Size is the number of leaves appended.
func (f *Frontier) Size() int64 { return f.size }

// Root is the RFC 6962 root of the leaves appended (as tlog.TreeHash
// returns it: the zero Hash for the empty tree).
func (f *Frontier) Root() tlog.Hash {
	if len(f.hashes) == 0 {
		return tlog.Hash{}
	}
	r := f.hashes[len(f.hashes)-1]
	for i := len(f.hashes) - 2; i >= 0; i-- {
		r = tlog.NodeHash(f.hashes[i], r)
	}
	return r
}
