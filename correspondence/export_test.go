package correspondence

// AppendSignedFromCore exposes appendSignedFromCore to the external tests
// and benchmarks.
var AppendSignedFromCore = appendSignedFromCore
