// Package tlog is what is ours in the relay's verifiable log (spec
// tlog.md, issue 24): C2SP tlog-tiles paths and entry bundles, the project's
// checkpoint origin, C2SP tlog-checkpoint notes signed with the relay's log
// key, and the integration step that turns new leaves into tiles. The
// hashing, proofs and note format are golang.org/x/mod/sumdb/tlog and
// golang.org/x/mod/sumdb/note; this package adds no I/O of its own (no
// store, no HTTP): callers pass readers and get values back.
//
// Leaf i of a project's tree is the immutable {event, receipt} JSON of the
// record with received_seq i+1 (store.Record.ImmutableJSON).
package tlog
