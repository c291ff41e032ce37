package e2ee

import (
	"context"
	"encoding/json"
	"errors"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/store"
)

// errNoDevice: no application-service device is stored (a lookup; none
// is made).
var errNoDevice = errors.New("no application-service device stored")

// RelayDevice names the relay's Matrix device without making one (the
// bindings' e2ee status, couriers/matrix.Binder.Device): in bot mode
// (appservice false) the access token's, from whoami; in
// application-service mode the one AppserviceDevice made and stored, ""
// before the first start with encryption. The user is cli's. Errors: the
// homeserver's (bot mode), the store's, a stored device that does not
// parse.
func RelayDevice(ctx context.Context, cli *mautrix.Client, appservice bool, st store.MatrixCrypto) (id.UserID, id.DeviceID, error) {
	if !appservice {
		who, err := cli.Whoami(ctx)
		if err != nil {
			return cli.UserID, "", err
		}
		return who.UserID, who.DeviceID, nil
	}
	raw, err := st.MatrixCryptoSecret(ctx, store.MatrixAppserviceDevice, func() (string, error) { return "", errNoDevice })
	if errors.Is(err, errNoDevice) {
		return cli.UserID, "", nil
	}
	if err != nil {
		return cli.UserID, "", err
	}
	var d struct {
		DeviceID id.DeviceID `json:"device_id"`
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return cli.UserID, "", errors.New("the stored application-service device does not parse")
	}
	return cli.UserID, d.DeviceID, nil
}
