package e2ee

import (
	"encoding/json"
	"slices"
	"testing"

	"maunium.net/go/mautrix/id"
)

// synapseTxn is a transaction as Synapse 1.160 pushes it with
// msc2409_to_device_messages_enabled and msc3202_transaction_extensions:
// one room event, to-device events for the relay's device, for another
// device of the same user and for another user, device lists, and
// one-time-key counts of two devices (under both of Synapse's names).
const synapseTxn = `{"events":[{"type":"m.room.encrypted","room_id":"!r:acrelay.test","event_id":"$e","sender":"@alice:acrelay.test","content":{}}],
"ephemeral":[],
"de.sorunome.msc2409.to_device":[
 {"type":"m.room.encrypted","sender":"@alice:acrelay.test","to_user_id":"@acrelay:acrelay.test","to_device_id":"RELAYDEV","content":{"algorithm":"m.olm.v1.curve25519-aes-sha2","sender_key":"k","ciphertext":{}}},
 {"type":"m.room_key_request","sender":"@alice:acrelay.test","to_user_id":"@acrelay:acrelay.test","to_device_id":"OTHERDEV","content":{}},
 {"type":"m.dummy","sender":"@alice:acrelay.test","to_user_id":"@bob:acrelay.test","to_device_id":"RELAYDEV","content":{}}],
"org.matrix.msc3202.device_lists":{"changed":["@alice:acrelay.test"],"left":[]},
"org.matrix.msc3202.device_one_time_key_counts":{"@acrelay:acrelay.test":{"RELAYDEV":{"signed_curve25519":7}}},
"org.matrix.msc3202.device_one_time_keys_count":{"@acrelay:acrelay.test":{"RELAYDEV":{"signed_curve25519":7},"OTHERDEV":{"signed_curve25519":50}}}}`

// TestParseDeviceTraffic: exactly the to-device events addressed to the
// device, the device lists, and the device's own counts.
func TestParseDeviceTraffic(t *testing.T) {
	const user, device = id.UserID("@acrelay:acrelay.test"), id.DeviceID("RELAYDEV")
	tr, err := ParseDeviceTraffic([]byte(synapseTxn), user, device)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Any || len(tr.ToDevice) != 1 || tr.ToDevice[0].Type.Type != "m.room.encrypted" || tr.ToDevice[0].ToDeviceID != device {
		t.Fatalf("to-device %+v (any %v), want the one m.room.encrypted for RELAYDEV", tr.ToDevice, tr.Any)
	}
	if tr.DeviceLists == nil || !slices.Equal(tr.DeviceLists.Changed, []id.UserID{"@alice:acrelay.test"}) || len(tr.DeviceLists.Left) != 0 {
		t.Fatalf("device lists %+v", tr.DeviceLists)
	}
	if tr.OTKCount == nil || tr.OTKCount.SignedCurve25519 != 7 || tr.OTKCount.UserID != user || tr.OTKCount.DeviceID != device {
		t.Fatalf("one-time-key counts %+v, want 7 signed_curve25519 of RELAYDEV", tr.OTKCount)
	}
	// Every device of the user (a process that does not know the device).
	all, err := ParseDeviceTraffic([]byte(synapseTxn), user, "")
	if err != nil || len(all.ToDevice) != 2 || all.OTKCount != nil {
		t.Fatalf("any device: %d to-device events, counts %+v, err %v; want 2, none", len(all.ToDevice), all.OTKCount, err)
	}
	// The stable names, and a transaction without device traffic (as
	// Dendrite pushes them).
	stable, err := ParseDeviceTraffic([]byte(`{"events":[],"to_device":[{"type":"m.dummy","sender":"@a:x","to_user_id":"@acrelay:acrelay.test","to_device_id":"RELAYDEV","content":{}}],
		"device_lists":{"changed":[],"left":["@gone:x"]},"device_one_time_keys_count":{"@acrelay:acrelay.test":{"RELAYDEV":{"signed_curve25519":0}}}}`), user, device)
	if err != nil || len(stable.ToDevice) != 1 || stable.DeviceLists == nil || stable.DeviceLists.Left[0] != "@gone:x" || stable.OTKCount == nil || stable.OTKCount.SignedCurve25519 != 0 {
		t.Fatalf("stable names: %+v, %v", stable, err)
	}
	for _, body := range []string{`{"events":[]}`, `{"events":[],"de.sorunome.msc2409.to_device":[],"org.matrix.msc3202.device_lists":{"changed":[],"left":[]}}`} {
		none, err := ParseDeviceTraffic([]byte(body), user, device)
		if err != nil || none.Any || none.ToDevice != nil || none.DeviceLists != nil || none.OTKCount != nil {
			t.Fatalf("%s: %+v, %v; want no device traffic", body, none, err)
		}
	}
	for _, body := range []string{`[]`, `{"de.sorunome.msc2409.to_device":{}}`, `{"device_lists":{"changed":"x"}}`, `not json`} {
		if _, err := ParseDeviceTraffic([]byte(body), user, device); err == nil {
			t.Errorf("%s: no error", body)
		}
	}
}

// FuzzParseDeviceTraffic: any body is parsed or refused, never a panic;
// what it hands on is only ever addressed to the device, counts only the
// device's, and a body it accepts is JSON.
func FuzzParseDeviceTraffic(f *testing.F) {
	f.Add([]byte(synapseTxn))
	f.Add([]byte(`{"events":[],"to_device":[null,{"to_user_id":"@acrelay:acrelay.test","to_device_id":"RELAYDEV"}]}`))
	f.Add([]byte(`{"device_one_time_keys_count":{"@acrelay:acrelay.test":{"RELAYDEV":null}}}`))
	f.Add([]byte(`{}`))
	const user, device = id.UserID("@acrelay:acrelay.test"), id.DeviceID("RELAYDEV")
	f.Fuzz(func(t *testing.T, body []byte) {
		tr, err := ParseDeviceTraffic(body, user, device)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body that is not JSON: %q", body)
		}
		for _, ev := range tr.ToDevice {
			if ev.ToUserID != user || ev.ToDeviceID != device {
				t.Fatalf("handed on an event for %s %s", ev.ToUserID, ev.ToDeviceID)
			}
		}
		if tr.OTKCount != nil && (tr.OTKCount.UserID != user || tr.OTKCount.DeviceID != device) {
			t.Fatalf("counts of %s %s", tr.OTKCount.UserID, tr.OTKCount.DeviceID)
		}
		if !tr.Any && (len(tr.ToDevice) > 0 || tr.DeviceLists != nil || tr.OTKCount != nil) {
			t.Fatal("traffic without Any")
		}
	})
}
