// Package tlogwitness checks acrelay as a C2SP tlog-witness
// (POST /v1/witness/add-checkpoint, issue 34) with a client written by
// others: transparency-dev/witness's HTTP client (client/http, the
// submitting side of its omniwitness feeders), submitting the checkpoints
// of a log built with golang.org/x/mod's tlog, and acrelay's
// cosignatures verified with transparency-dev/formats and x/mod's note,
// not with acrelay's code.
//
// It is a module of its own, run by scripts/test.sh, so that acrelay's
// go.mod stays free of transparency-dev/witness: the only version the
// module proxy serves requires a pre-release of transparency-dev/formats
// and newer prometheus/common, yaml and oauth2 than acrelay's, which
// acrelay's own build would otherwise be moved to.
package tlogwitness
