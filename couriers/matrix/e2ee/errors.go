package e2ee

import (
	"errors"
	"time"
)

// ErrNotBuilt: the binary has no Matrix encryption (built without -tags goolm).
var ErrNotBuilt = errors.New("this acrelay was built without Matrix end-to-end encryption (build with -tags goolm)")

// Reasons a to-device event is refused (ProcessSync).
const (
	// ReasonOlmNotForDevice: an olm message with no ciphertext for this
	// device's identity key (meant for another device).
	ReasonOlmNotForDevice = "olm_not_for_this_device"
	// ReasonToDeviceMalformed: an m.room.encrypted to-device event whose
	// content does not parse or is not olm.
	ReasonToDeviceMalformed = "to_device_malformed"
	// ReasonToDeviceFlood: more than MaxToDevicePerSender events from
	// one sender within ToDeviceWindow; the rest are dropped.
	ReasonToDeviceFlood = "to_device_flood"
)

// MaxToDevicePerSender bounds the to-device events of one sender that
// the olm machine takes within ToDeviceWindow (a room key share is one
// event per session and device; a flood is dropped, counted and logged,
// never processed). Homeservers cut to-device traffic into syncs of their
// own size, so the bound is over time, not per sync.
const (
	MaxToDevicePerSender = 100
	ToDeviceWindow       = time.Minute
)
