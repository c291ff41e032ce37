package wire

// Codes of POST /v1/log/{project_id}/cosignatures (a witness submits its
// cosignature on this relay's checkpoint; docs/verifiable-log.md).
const (
	// CodeCheckpointNotPublished (422): the note is not a checkpoint this
	// relay published for the project: malformed, not signed by its log
	// key, of another origin, or larger than its tree.
	CodeCheckpointNotPublished = "checkpoint_not_published"
	// CodeCosignerUnknown (403): no cosignature on the note verifies with
	// the witness key of a peer link of the project.
	CodeCosignerUnknown = "cosigner_unknown"
)

// Codes of POST /v1/witness/add-checkpoint (this relay as a C2SP
// tlog-witness of other logs; the statuses are C2SP's, the codes ours).
// A 409 is C2SP's own text/x.tlog.size body, not a JSON error.
const (
	// CodeWitnessRequestInvalid (400): not "old <N>", up to 63 proof
	// lines, an empty line and a checkpoint; or the old size is above
	// the checkpoint's.
	CodeWitnessRequestInvalid = "witness_request_invalid"
	// CodeWitnessLogUnknown (404): the checkpoint's origin is not a log
	// this relay witnesses.
	CodeWitnessLogUnknown = "witness_log_unknown"
	// CodeWitnessSignatureInvalid (403): no signature by a key this relay
	// trusts for the origin, or one that fails.
	CodeWitnessSignatureInvalid = "witness_signature_invalid"
	// CodeWitnessInconsistent (422): the consistency proof does not
	// verify, a proof came with old size 0, the same size came with
	// another root, or a size-0 checkpoint's root is not the empty tree's.
	CodeWitnessInconsistent = "witness_inconsistent"
)
