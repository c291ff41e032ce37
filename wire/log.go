package wire

// Shapes and codes of the verifiable log's reads (spec/tlog.md "Reading").

// InclusionProof is the answer of GET
// /v1/log/{project_id}/proof/inclusion?received_seq=S&tree_size=N: the
// RFC 9162 §2.1.3 inclusion proof of leaf S−1 in the tree of size N, as
// computed by golang.org/x/mod/sumdb/tlog.ProveRecord. Hashes are the
// 32-byte node hashes, standard base64 in JSON, leaf side first.
type InclusionProof struct {
	LeafIndex int64    `json:"leaf_index"`
	TreeSize  int64    `json:"tree_size"`
	Hashes    [][]byte `json:"hashes"`
}

// ConsistencyProof is the answer of GET
// /v1/log/{project_id}/proof/consistency?old_size=M&tree_size=N: the
// RFC 9162 §2.1.4 consistency proof between the trees of sizes M ≤ N
// (tlog.ProveTree). Hashes as InclusionProof's; empty when M is 0 or M = N.
type ConsistencyProof struct {
	OldSize  int64    `json:"old_size"`
	TreeSize int64    `json:"tree_size"`
	Hashes   [][]byte `json:"hashes"`
}

// Codes of the log's reads.
const (
	// CodeLogPathInvalid (404): a path under the log prefix that names no
	// resource of C2SP tlog-tiles (a bad level, index, width or form).
	CodeLogPathInvalid = "log_path_invalid"
	// CodeLogBeyondTree (404): a tile, entry bundle or proof beyond the
	// tree the relay has integrated (or a partial tile narrower or wider
	// than the tree holds).
	CodeLogBeyondTree = "log_beyond_tree"
	// CodeLogEmpty (404): no checkpoint yet (nothing integrated).
	CodeLogEmpty = "log_empty"
	// CodeReceivedSeqInvalid (400): received_seq is not a decimal ≥ 1.
	CodeReceivedSeqInvalid = "received_seq_invalid"
	// CodeTreeSizeInvalid (400): tree_size or old_size is not a decimal
	// ≥ 0 (≥ 1 for an inclusion proof), or old_size > tree_size.
	CodeTreeSizeInvalid = "tree_size_invalid"
	// CodeLogEntryTooLarge (404): an entry bundle holding a record over
	// 65535 bytes, which a C2SP bundle (uint16 lengths) cannot carry; the
	// record is still in the tree and has inclusion proofs.
	CodeLogEntryTooLarge = "log_entry_too_large"
	// CodeLogEntriesNeedToken (403): entry bundles through a feed
	// capability, which reads one repository while a bundle holds every
	// repository's records.
	CodeLogEntriesNeedToken = "log_entries_need_token"
	// CodeLogUnavailable (503): the store failed while reading the log.
	CodeLogUnavailable = "log_unavailable"
)
