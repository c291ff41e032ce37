//go:build goolm

package e2ee_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/couriers/matrix/e2ee"
	"github.com/acrelay/acrelay/internal/matrixtest"
	"github.com/acrelay/acrelay/store"
)

// TestDescribeBindingsDendrite: what the bindings route and CLI say of a
// bound room's encryption (Binder.Describe), exact bytes at each stage,
// against Dendrite: an encrypted room the relay's user is invited to (no
// device keys: the relay never started); one it is not in (not known);
// joined, with
// the device's keys published but no process holding the lease over the
// device; with the lease held (takes part, not cross-signed: no
// password); a relay without encryption; an unencrypted room (as it always
// read).
func TestDescribeBindingsDendrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Dendrite; skipped with -short")
	}
	r := newRelay(t, "sqlite")
	alice := matrixtest.NewMember(t, r.hs, "alice")
	who, err := r.cli.Whoami(ctx)
	if err != nil || who.DeviceID == "" {
		t.Fatalf("whoami: %v %+v", err, who)
	}
	resp, err := alice.Cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{r.cli.UserID},
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	room := resp.RoomID
	b := &matrix.Binder{Store: r.st, Client: r.cli, CanEncrypt: true, Leases: r.st,
		Device: func(ctx context.Context) (id.UserID, id.DeviceID, error) {
			return e2ee.RelayDevice(ctx, r.cli, false, r.st)
		}}
	bd, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: room.String()})
	if err != nil {
		t.Fatal(err)
	}
	head := `{"binding_id":"` + bd.ID + `","project_id":"` + r.signer.ProjectID + `","room_id":"` + room.String() + `","created_at":"` +
		correspondence.FormatTimestamp(bd.CreatedAt) + `"`
	e2eeJSON := func(keys, lease bool, detail string) string {
		return `"e2ee":{"available":true,"device_id":"` + who.DeviceID.String() + `","device_keys":` + fmtBool(keys) + `,"lease_held":` + fmtBool(lease) +
			`,"cross_signed":false,"takes_part":` + fmtBool(keys && lease) + `,"detail":"` + detail + `"}}`
	}
	check := func(name string, b *matrix.Binder, bd store.MatrixBinding, want string) {
		t.Helper()
		got, err := json.Marshal(b.Describe(ctx, []store.MatrixBinding{bd})[0])
		if err != nil || string(got) != want {
			t.Errorf("%s:\n%s\nwant\n%s", name, got, want)
		}
	}
	// Dendrite lets an invited user read the room's m.room.encryption.
	check("invited, relay never started", b, bd, head+`,"encrypted":true,`+e2eeJSON(false, false, matrix.DetailNoDeviceKeys))
	// A room the relay's user is not in at all: its encryption unknown.
	other, err := alice.Cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat",
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: other.RoomID.String()})
	if err != nil {
		t.Fatal(err)
	}
	check("not in the room", b, ob, `{"binding_id":"`+ob.ID+`","project_id":"`+r.signer.ProjectID+`","room_id":"`+other.RoomID.String()+`","created_at":"`+
		correspondence.FormatTimestamp(ob.CreatedAt)+`",`+e2eeJSON(false, false, matrix.DetailRoomUnknown+"; "+matrix.DetailNoDeviceKeys))

	if _, err := r.cli.JoinRoomByID(ctx, room); err != nil {
		t.Fatal(err)
	}
	r.start() // the device's keys are published; this harness takes no lease
	check("joined, no lease held", b, bd, head+`,"encrypted":true,`+e2eeJSON(true, false, matrix.DetailLeaseFree))

	if _, err := r.st.AcquireLeases(ctx, matrix.CryptoLease, "relay-a", []string{""}, time.Minute); err != nil {
		t.Fatal(err)
	}
	check("lease held", b, bd, head+`,"encrypted":true,`+e2eeJSON(true, true, matrix.DetailNotCrossSigned))

	none := &matrix.Binder{Store: r.st, Client: r.cli, Leases: r.st}
	check("a relay without encryption", none, bd, head+`,"encrypted":true,"e2ee":{"available":false,"device_keys":false,"lease_held":false,`+
		`"cross_signed":false,"takes_part":false,"detail":"`+matrix.DetailNoEncryption+`"}}`)

	plainRoom, err := matrix.CreateRoom(ctx, r.cli, "plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: plainRoom.String()})
	if err != nil {
		t.Fatal(err)
	}
	check("unencrypted room", b, pb, `{"binding_id":"`+pb.ID+`","project_id":"`+r.signer.ProjectID+`","room_id":"`+plainRoom.String()+
		`","created_at":"`+correspondence.FormatTimestamp(pb.CreatedAt)+`"}`)
}

func fmtBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
