package e2ee

import (
	"encoding/json"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// DeviceTraffic is what one application-service transaction carries for
// one device of the application service, as Synapse pushes it instead of
// a /sync (MSC2409 to-device events, MSC3202 device lists and one-time-key
// counts; the stable names first, then the unstable ones Synapse 1.160
// sends).
type DeviceTraffic struct {
	// ToDevice are the to-device events addressed to the device: each
	// pushed event names its to_user_id and to_device_id, and the others
	// are left out.
	ToDevice []*event.Event
	// DeviceLists are the users whose devices changed or who left every
	// shared room; nil when the transaction has none.
	DeviceLists *mautrix.DeviceLists
	// OTKCount are the device's own one-time-key counts (UserID and
	// DeviceID set); nil when the transaction has none for it (absent
	// counts are not zero).
	OTKCount *mautrix.OTKCount
	// Any says whether the transaction carried device traffic at all, for
	// this device or another: the homeserver pushes it.
	Any bool
}

// ParseDeviceTraffic reads body, the JSON of a transaction (PUT
// /_matrix/app/v1/transactions/{txnId}), for device of user; device ""
// takes the to-device events of every device of user. Keys:
// "to_device" / "de.sorunome.msc2409.to_device", "device_lists" /
// "org.matrix.msc3202.device_lists", "device_one_time_keys_count" /
// "org.matrix.msc3202.device_one_time_keys_count". Errors: a body that is
// not a JSON object of that shape.
func ParseDeviceTraffic(body []byte, user id.UserID, device id.DeviceID) (*DeviceTraffic, error) {
	var txn struct {
		ToDevice        []*event.Event                                 `json:"to_device"`
		MSC2409ToDevice []*event.Event                                 `json:"de.sorunome.msc2409.to_device"`
		DeviceLists     *mautrix.DeviceLists                           `json:"device_lists"`
		MSC3202Lists    *mautrix.DeviceLists                           `json:"org.matrix.msc3202.device_lists"`
		OTKCount        map[id.UserID]map[id.DeviceID]mautrix.OTKCount `json:"device_one_time_keys_count"`
		MSC3202OTKCount map[id.UserID]map[id.DeviceID]mautrix.OTKCount `json:"org.matrix.msc3202.device_one_time_keys_count"`
	}
	if err := json.Unmarshal(body, &txn); err != nil {
		return nil, fmt.Errorf("application-service transaction: %w", err)
	}
	t := &DeviceTraffic{}
	for _, ev := range append(txn.ToDevice, txn.MSC2409ToDevice...) {
		if ev == nil {
			continue
		}
		t.Any = true
		if ev.ToUserID == user && (device == "" || ev.ToDeviceID == device) {
			t.ToDevice = append(t.ToDevice, ev)
		}
	}
	for _, l := range []*mautrix.DeviceLists{txn.DeviceLists, txn.MSC3202Lists} {
		if l != nil && (len(l.Changed) > 0 || len(l.Left) > 0) {
			t.DeviceLists, t.Any = l, true
			break
		}
	}
	for _, counts := range []map[id.UserID]map[id.DeviceID]mautrix.OTKCount{txn.OTKCount, txn.MSC3202OTKCount} {
		if len(counts) == 0 {
			continue
		}
		t.Any = true
		if c, ok := counts[user][device]; ok && device != "" {
			c.UserID, c.DeviceID = user, device
			t.OTKCount = &c
		}
		break
	}
	return t, nil
}
