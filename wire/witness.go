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
