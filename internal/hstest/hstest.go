// Package hstest names what the Matrix tests need of a real homeserver,
// so that one test body runs against each homeserver the test command
// provisions: Dendrite (internal/dendritetest) and Synapse
// (internal/synapsetest). Every server runs on 127.0.0.1 with the
// server name "acrelay.test", without federation, and is stopped on the
// test's cleanup.
package hstest

import (
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// ServerName is the server name of every test homeserver: user ids are
// @localpart:acrelay.test, and application-service registrations name
// their namespaces under it.
const ServerName = "acrelay.test"

// Options configure a homeserver's start.
type Options struct {
	// AppserviceYAML, when set, is an application-service registration
	// (YAML, as `acrelay matrix registration` prints it) the homeserver
	// loads at start.
	AppserviceYAML string
}

// Homeserver is one running homeserver of a test.
type Homeserver interface {
	// Name is the program and its version, e.g. "Synapse 1.160.0", for
	// messages.
	Name() string
	// HomeserverURL is its client-server API base, http://127.0.0.1:PORT.
	HomeserverURL() string
	// CreateUser creates the user localpart (an existing one is reused)
	// with the password Password(localpart) and returns a client of it
	// on a new device with its access token; it fails the test when the
	// homeserver refuses.
	CreateUser(localpart string) *mautrix.Client
	// Password is the password CreateUser gives localpart.
	Password(localpart string) string
	// UserID is @localpart:ServerName.
	UserID(localpart string) id.UserID
}

// Start starts a homeserver for t, or skips t saying why the homeserver
// is not available (dendritetest.Start, synapsetest.Start).
type Start func(t testing.TB, opt Options) Homeserver
