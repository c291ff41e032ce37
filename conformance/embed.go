package conformance

import (
	"embed"
)

// seeds holds the user's seed documents as copied into the repository.
//
//go:embed testdata/seeds/*.txt
var seeds embed.FS

// Seed file names inside the embedded folder.
const (
	seed000File = "testdata/seeds/000_d18f2735a1feda05.txt" // correspondence vectors
	seed001File = "testdata/seeds/001_eade5896d07b0a7c.txt" // predicate envelope vectors
)

// PublicVectorsPath is the public vector file's path inside the shared
// folder.
const PublicVectorsPath = "spec/agent-correspondence-0.1-vectors.json"

// Seed returns the bytes of an embedded seed file by name
// ("000_d18f2735a1feda05.txt"). Error: fs.ErrNotExist for an unknown name.
func Seed(name string) ([]byte, error) {
	return seeds.ReadFile("testdata/seeds/" + name)
}
