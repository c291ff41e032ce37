// Package logwitness submits each project's checkpoints to external C2SP
// tlog-witness witnesses (issue 34; https://c2sp.org/tlog-witness), so
// readers who share no federation peer with the relay can still detect a
// split view: a witness cosigns a checkpoint only once it has checked it
// against the last one it cosigned for the origin.
//
// For every project in scope (public projects by default) and every
// configured witness, the Submitter POSTs the project's latest checkpoint,
// exactly the note the relay serves, to <witness URL>/add-checkpoint with
// an "old" line naming the size the witness last cosigned and the RFC 6962
// consistency proof from that size, read from the stored tiles. The
// witness's known size is learnt from its answers (a 200 for the size
// sent, a 409 text/x.tlog.size body) and kept in the store
// (store.LogWitnesses), so a restart or another process resumes from it,
// and a witness configured later receives the existing log (old 0). Its
// cosignature, once it verifies under the configured key, is stored
// (store.Cosignatures) and served on the checkpoint beside peers'.
//
// A witness answering 422 to a checkpoint of ours holds a tree of this
// origin that ours is not consistent with: that is the split-view alarm
// (evidence stored as a store.SplitView whose PeerID is PeerPrefix + the
// witness's name, one ERROR line, the metric, /readyz degraded); the
// Submitter then stops submitting that project to that witness.
//
// Pacing: at most one request per Options.Interval for one project at one
// witness (a public witness gives each log a quota), so a busy log costs
// 3600/Interval requests per hour per witness and a quiet log's latest
// checkpoint is submitted within Interval of its signing. Failures back
// off (doubling to MaxBackoff) and are said once.
//
// What it does not do: run without a lease (cmd runs one Submitter per
// relay under a relay-wide lease.Single), route witness URLs through the
// SSRF guard (a witness URL is the operator's configuration, not a
// callback), or witness other logs (package witness and relay's
// add-checkpoint route do that).
package logwitness
