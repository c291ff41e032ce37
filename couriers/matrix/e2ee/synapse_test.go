//go:build goolm

package e2ee_test

import (
	"testing"

	"github.com/acrelay/acrelay/internal/hstest"
	"github.com/acrelay/acrelay/internal/synapsetest"
)

// The encrypted-room tests again on Synapse, Element's reference
// homeserver (Debian's matrix-synapse in the sid root
// scripts/provision_synapse.sh caches; internal/synapsetest), asserting
// exactly what they assert on Dendrite.

// startSynapse is synapsetest.Start as an hstest.Start.
func startSynapse(t testing.TB, opt hstest.Options) hstest.Homeserver {
	return synapsetest.Start(t, opt)
}

// TestEncryptedRoomBotSynapseSQLite: testEncryptedRoomBot on Synapse, the
// crypto store in the relay's SQLite database: every record reaches the
// member as m.room.encrypted that decrypts to the record and the notice
// in receipt order exactly once, no plaintext from the relay, an
// encrypted submission appended and answered with one encrypted reply,
// the same across a restart.
func TestEncryptedRoomBotSynapseSQLite(t *testing.T) {
	testEncryptedRoomBot(t, startSynapse, "sqlite")
}

// TestEncryptedRoomAppserviceSynapse: testEncryptedRoomAppservice on
// Synapse: the relay's device from m.login.application_service, its
// to-device traffic through that device's own /sync, the room's events
// pushed by Synapse's application-service transactions.
func TestEncryptedRoomAppserviceSynapse(t *testing.T) {
	testEncryptedRoomAppservice(t, startSynapse)
}

// TestCrossSignedAppserviceSynapse: testEncryptedRoomAppservice on
// Synapse with a member that excludes unverified devices: the
// application service's device cross-signs itself in the background with
// no password (Synapse takes a user's first cross-signing keys without
// user-interactive auth, MSC3967), the recovery key is stored and printed
// once, and the strict member still reads every record and gets its
// encrypted submission answered, across a restart.
func TestCrossSignedAppserviceSynapse(t *testing.T) {
	testEncryptedRoomAppserviceXS(t, startSynapse, xsStrict)
}

// TestCrossSignedDeviceSynapse: testCrossSignedDevice on Synapse: the bot
// cross-signs its device with its password (Synapse's user-interactive
// auth), prints the recovery key once, and a member whose client shares
// room keys only with cross-signed devices reads its records and gets
// its submission answered.
func TestCrossSignedDeviceSynapse(t *testing.T) { testCrossSignedDevice(t, startSynapse) }

// TestEncryptedSizeLimitSynapse: testEncryptedSizeLimit on Synapse: the
// largest plaintext content whose megolm event Synapse takes (its 65,536
// bytes of event, 413 M_TOO_LARGE above) leaves room for the notice above
// MaxEncryptedContentBytes, and a larger record goes as a reference.
func TestEncryptedSizeLimitSynapse(t *testing.T) { testEncryptedSizeLimit(t, startSynapse) }
