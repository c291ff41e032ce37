package synapsetest

import (
	"context"
	"testing"

	"github.com/acrelay/acrelay/internal/hstest"
)

// TestStartSynapse: Synapse starts from the provisioned root, a user
// made through the shared-secret admin API is who /whoami says on the
// device it was given, the same localpart again logs in on a new device,
// and a restart keeps the user (same database).
func TestStartSynapse(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Synapse; skipped with -short")
	}
	s := Start(t, hstest.Options{})
	ctx := context.Background()
	a := s.CreateUser("alice")
	who, err := a.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if who.UserID != "@alice:acrelay.test" || who.DeviceID == "" || who.DeviceID != a.DeviceID {
		t.Fatalf("whoami %+v, client device %s", who, a.DeviceID)
	}
	s.Restart()
	again := s.CreateUser("alice")
	if again.UserID != who.UserID || again.DeviceID == "" || again.DeviceID == a.DeviceID {
		t.Fatalf("second CreateUser: user %s device %s (first device %s)", again.UserID, again.DeviceID, a.DeviceID)
	}
	if _, err := a.Whoami(ctx); err != nil {
		t.Fatalf("the first device's token after a restart: %v", err)
	}
	t.Logf("%s on %s", s.Name(), s.URL)
}
