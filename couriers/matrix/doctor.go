package matrix

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/store"
)

// Finding is one result of the checks behind `acrelay matrix doctor`.
type Finding struct {
	Check   string `json:"check"`             // a Check* name
	Subject string `json:"subject,omitempty"` // the room, user or URL checked
	Status  string `json:"status"`            // StatusOK, StatusWarn or StatusFail
	Detail  string `json:"detail"`            // one line for an operator, never a token
}

// Checks and statuses of a Finding.
const (
	CheckHomeserver  = "homeserver"
	CheckCredentials = "credentials"
	CheckPing        = "appservice_ping"
	CheckRoom        = "room"
	CheckThrottle    = "throttle"

	StatusOK   = "ok"
	StatusWarn = "warn"
	StatusFail = "fail"
)

// CheckHomeserverReachable asks GET /_matrix/client/versions: fail when
// the homeserver does not answer.
func CheckHomeserverReachable(ctx context.Context, cli *mautrix.Client) Finding {
	f := Finding{Check: CheckHomeserver, Subject: cli.HomeserverURL.String()}
	v, err := cli.Versions(ctx)
	if err != nil {
		f.Status, f.Detail = StatusFail, "unreachable: "+shortError(err)
		return f
	}
	latest := ""
	if n := len(v.Versions); n > 0 {
		latest = " (spec " + v.Versions[n-1].String() + ")"
	}
	f.Status, f.Detail = StatusOK, "reachable"+latest
	return f
}

// CheckCredentialsAccepted asks GET /account/whoami with the client's
// token (the application service's as_token, or the bot's access token):
// fail when the homeserver rejects it, which for an application service
// means the homeserver does not know the registration. On success it sets
// cli.UserID.
func CheckCredentialsAccepted(ctx context.Context, cli *mautrix.Client, appservice bool) Finding {
	f := Finding{Check: CheckCredentials, Subject: cli.UserID.String()}
	who, err := cli.Whoami(ctx)
	if err != nil {
		f.Status = StatusFail
		if appservice {
			f.Detail = "the homeserver rejects the registration's as_token (" + shortError(err) + "): list the registration file in the homeserver's " +
				"app_service_config_files (Synapse) or app_service_api.config_files (Dendrite), by absolute path, and restart the homeserver"
		} else {
			f.Detail = "the homeserver rejects the bot's access token (" + shortError(err) + "): log the bot in again and pass the new token"
		}
		return f
	}
	asked := cli.UserID
	cli.UserID = who.UserID
	f.Subject, f.Status = who.UserID.String(), StatusOK
	f.Detail = "the homeserver accepts the bot's access token"
	if !appservice && asked != "" && asked != who.UserID {
		f.Status = StatusFail
		f.Detail = "the access token belongs to " + who.UserID.String() + ", not to --matrix-user-id " + asked.String() +
			": pass the bot's own user id, or a token of that user"
	}
	if appservice {
		f.Detail = "the homeserver accepts the registration's as_token"
	}
	return f
}

// CheckAppservicePing asks the homeserver to ping the application
// service (POST /_matrix/client/v1/appservice/{id}/ping): warn when it
// cannot reach the relay's listener (the relay may simply not be running)
// or has no such endpoint.
func CheckAppservicePing(ctx context.Context, cli *mautrix.Client, appserviceID string) Finding {
	f := Finding{Check: CheckPing, Subject: appserviceID}
	resp, err := cli.AppservicePing(ctx, appserviceID, "acrelay-doctor")
	if Unsupported(err) {
		f.Status, f.Detail = StatusWarn, "the homeserver has no appservice ping ("+shortError(err)+
			"; Dendrite 0.13.8 has none): after an outage it resumes pushing on its own backoff"
		return f
	}
	if err != nil {
		f.Status, f.Detail = StatusWarn, "the homeserver could not ping the relay's application-service listener ("+shortError(err)+
			"); is `acrelay serve` running, and does the registration's url reach it from the homeserver?"
		return f
	}
	f.Status, f.Detail = StatusOK, fmt.Sprintf("the homeserver reached the relay's listener in %d ms", resp.DurationMS)
	return f
}

// Unsupported reports a homeserver's answer that it has no such endpoint
// (M_UNRECOGNIZED, 404 or 405).
func Unsupported(err error) bool {
	var he mautrix.HTTPError
	if !errors.As(err, &he) {
		return false
	}
	return he.RespError != nil && he.RespError.ErrCode == mautrix.MUnrecognized.ErrCode ||
		he.Response != nil && (he.Response.StatusCode == 404 || he.Response.StatusCode == 405)
}

// CheckRoomPostable reads the client's membership of room and the room's
// power levels: fail unless the user is joined (or invited: the courier
// joins on its first delivery, a warning) and may send both the record
// event and the m.notice.
func CheckRoomPostable(ctx context.Context, cli *mautrix.Client, room id.RoomID) Finding {
	f := Finding{Check: CheckRoom, Subject: room.String()}
	var m event.MemberEventContent
	if err := cli.StateEvent(ctx, room, event.StateMember, cli.UserID.String(), &m); err != nil {
		f.Status, f.Detail = StatusFail, "the relay's user "+cli.UserID.String()+" cannot read the room ("+shortError(err)+"): it is not in the room; invite it"
		return f
	}
	switch m.Membership {
	case event.MembershipJoin:
	case event.MembershipInvite:
		f.Status, f.Detail = StatusWarn, "the relay's user is invited, not yet joined: the courier joins on its first delivery"
		return f
	default:
		f.Status, f.Detail = StatusFail, fmt.Sprintf("the relay's user %s is not in the room (membership %q): invite it again", cli.UserID, m.Membership)
		return f
	}
	var pl event.PowerLevelsEventContent
	if err := cli.StateEvent(ctx, room, event.StatePowerLevels, "", &pl); err != nil {
		f.Status, f.Detail = StatusFail, "cannot read the room's power levels ("+shortError(err)+")"
		return f
	}
	have := pl.GetUserLevel(cli.UserID)
	for _, t := range []event.Type{{Type: EventTypeRecord, Class: event.MessageEventType}, event.EventMessage} {
		if need := pl.GetEventLevel(t); have < need {
			f.Status, f.Detail = StatusFail, fmt.Sprintf("the relay's user has power level %d, the room requires %d to send %s: raise its level", have, need, t.Type)
			return f
		}
	}
	f.Status, f.Detail = StatusOK, "joined, and may send records and notices"
	return f
}

// CheckThrottled looks at the stored delivery state of a binding's room
// (the courier's target): fail when its last failure is the homeserver's
// 429, which in bot mode on Synapse means the bot is under the default
// message rate limit.
func CheckThrottled(b store.MatrixBinding, ts store.TargetState, bot id.UserID) Finding {
	f := Finding{Check: CheckThrottle, Subject: b.RoomID}
	if ts.Failures == 0 || !strings.Contains(ts.LastError, mautrix.MLimitExceeded.ErrCode) && !strings.Contains(ts.LastError, "HTTP 429") {
		f.Status, f.Detail = StatusOK, "no 429 from the homeserver in the courier's last delivery"
		return f
	}
	f.Status = StatusFail
	f.Detail = fmt.Sprintf("the homeserver throttles the courier (%d failed deliveries in a row, the last a 429). "+
		"On Synapse lift the limit of %s: POST /_synapse/admin/v1/users/%s/override_ratelimit "+
		`{"messages_per_second": 0, "burst_count": 0} with an admin's token, or use application-service mode`, ts.Failures, bot, bot)
	return f
}

// BoundRooms lists every binding of every project (for the doctor).
func BoundRooms(ctx context.Context, st interface {
	MatrixBoundProjects(ctx context.Context) ([]string, error)
	MatrixBindings(ctx context.Context, projectID string) ([]store.MatrixBinding, error)
}) ([]store.MatrixBinding, error) {
	ps, err := st.MatrixBoundProjects(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.MatrixBinding
	for _, p := range ps {
		bs, err := st.MatrixBindings(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, bs...)
	}
	return out, nil
}

// CheckRoomEncryption's details for an unencrypted room, and for one
// whose state the relay's user cannot read (not in it: CheckRoomPostable
// says so).
const (
	DetailUnencrypted       = "unencrypted: records and notices go as they are"
	DetailEncryptionUnknown = "cannot read the room's m.room.encryption: the relay's user is not in the room"
)

// Checks of end-to-end encryption (issue 31).
const (
	CheckEncryption = "room_encryption"
	CheckDevice     = "e2ee_device"
)

// CheckRoomEncryption says whether room is end-to-end encrypted and
// whether the relay can take part (canEncrypt: a goolm build in bot
// mode): fail when it is encrypted and the relay cannot (nothing is sent
// to it, never plaintext), or when the relay may not send m.room.encrypted
// there; ok otherwise, naming which it is.
func CheckRoomEncryption(ctx context.Context, cli *mautrix.Client, room id.RoomID, canEncrypt bool) Finding {
	f := Finding{Check: CheckEncryption, Subject: room.String()}
	enc, err := RoomEncrypted(ctx, cli, room)
	if err != nil {
		f.Status, f.Detail = StatusWarn, DetailEncryptionUnknown
		return f
	}
	if !enc {
		f.Status, f.Detail = StatusOK, DetailUnencrypted
		return f
	}
	if !canEncrypt {
		f.Status, f.Detail = StatusFail, "end-to-end encrypted, and this relay cannot take part (it needs a build with -tags goolm): "+
			"nothing is sent to the room and its encrypted submissions cannot be read"
		return f
	}
	var pl event.PowerLevelsEventContent
	if err := cli.StateEvent(ctx, room, event.StatePowerLevels, "", &pl); err == nil {
		if have, need := pl.GetUserLevel(cli.UserID), pl.GetEventLevel(event.EventEncrypted); have < need {
			f.Status, f.Detail = StatusFail, fmt.Sprintf("end-to-end encrypted; the relay's user has power level %d, the room requires %d to send m.room.encrypted: raise its level", have, need)
			return f
		}
	}
	f.Status, f.Detail = StatusOK, "end-to-end encrypted: the relay encrypts records, notices and replies (megolm) and decrypts submissions"
	return f
}

// CheckDeviceKeys asks the homeserver for the device keys of the relay's
// device (the access token's, from whoami): warn when it has none (the
// relay has not started with encryption yet: members' clients cannot
// share room keys with it) or when the device is not cross-signed by the
// user's self-signing key (clients that exclude unverified devices send
// it nothing); ok when both are there.
func CheckDeviceKeys(ctx context.Context, cli *mautrix.Client) Finding {
	who, err := cli.Whoami(ctx)
	if err != nil || who.DeviceID == "" {
		f := Finding{Check: CheckDevice, Subject: cli.UserID.String()}
		f.Status, f.Detail = StatusWarn, "the access token names no device: the relay cannot take part in encrypted rooms with it"
		return f
	}
	return checkDeviceKeys(ctx, cli, cli.UserID, who.DeviceID, false)
}

// whyNotCrossSignedAppservice ends the not-cross-signed details in
// application-service mode.
const whyNotCrossSignedAppservice = "an application service has no password, so the relay cross-signs its device only where the homeserver takes the user's first cross-signing keys without one (Synapse does; Dendrite 0.13.8 asks for a password): serve's log says which"

// CheckAppserviceDeviceKeys is CheckDeviceKeys for the application
// service's own device dev of user (e2ee.RelayDevice; "" before the
// relay's first start with encryption: warn), whose not-cross-signed
// warning says why (no password: only a homeserver that takes the first
// cross-signing keys without one lets the relay sign it).
func CheckAppserviceDeviceKeys(ctx context.Context, cli *mautrix.Client, user id.UserID, dev id.DeviceID) Finding {
	if dev == "" {
		return Finding{Check: CheckDevice, Subject: user.String(), Status: StatusWarn,
			Detail: "the application service has no device yet (`acrelay serve` makes it within seconds of its start): the relay cannot take part in encrypted rooms"}
	}
	return checkDeviceKeys(ctx, cli, user, dev, true)
}

func checkDeviceKeys(ctx context.Context, cli *mautrix.Client, user id.UserID, dev id.DeviceID, appservice bool) Finding {
	f := Finding{Check: CheckDevice, Subject: user.String() + " " + dev.String()}
	published, signed, err := deviceKeys(ctx, cli, user, dev)
	if err != nil {
		f.Status, f.Detail = StatusWarn, "cannot query the device's keys ("+shortError(err)+")"
		return f
	}
	if !published {
		f.Status, f.Detail = StatusWarn, "the relay's device has published no keys yet (`acrelay serve` does so within seconds of its start): members' clients cannot share room keys with it"
		return f
	}
	if !signed {
		f.Status, f.Detail = StatusWarn, "device keys published; the device is not cross-signed: clients that exclude unverified devices (Element's MSC4153 setting) send it no room keys"
		if appservice {
			f.Detail += "; " + whyNotCrossSignedAppservice
		}
		return f
	}
	f.Status, f.Detail = StatusOK, "device keys published and cross-signed by the relay's user"
	return f
}
