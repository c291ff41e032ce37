//go:build goolm

package e2ee

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/signatures"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/sqlstatestore"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/internal/backoff"
	"github.com/acrelay/acrelay/store"
)

// Built reports whether this binary has Matrix encryption (the goolm tag).
const Built = true

// The courier's own event types decrypt to plain JSON objects: known to
// mautrix's content parser, so that it does not warn of an unsupported
// type at every decryption.
func init() {
	for _, t := range []string{matrix.EventTypeRecord, matrix.EventTypeSubmit} {
		event.TypeMap[event.Type{Type: t, Class: event.MessageEventType}] = reflect.TypeOf(map[string]any{})
	}
}

// Options configure Open.
type Options struct {
	// Client is the relay's client: its user and access token. Open sets
	// its DeviceID (whoami: the device the access token belongs to) and
	// leaves Crypto and StateStore unset (the courier encrypts itself, so
	// nothing is ever encrypted or sent plaintext behind its back).
	Client *mautrix.Client
	// Store is the relay's store (the pickle key and the crypto tables).
	Store  store.MatrixCrypto
	Logger *slog.Logger
	// OnRefused, when set, is told the to-device events refused before
	// the olm machine sees them, by reason (ReasonToDevice*): the relay's
	// metric.
	OnRefused func(reason string, n int)
	// Password is the bot's account password, for the homeserver's
	// user-interactive auth when cross-signing keys are first published
	// (self_sign); "" skips making them (a device already signed, or
	// signable with the stored recovery key, is still handled).
	Password string
	// Appservice, in application-service mode, is the application
	// service's own client (its as_token, the sender user): where the
	// sender already has cross-signing keys that no stored recovery key
	// opens (a lost database), new ones are published with it, which
	// Synapse takes without user-interactive auth from an application
	// service. Nil in bot mode: such keys are left as they are.
	Appservice *mautrix.Client
	// PrintRecoveryKey, when set, is given the cross-signing recovery key
	// once, when it is made (serve prints it like the first start's
	// tokens); it is also kept in the store (store.MatrixRecoveryKey) and
	// never logged.
	PrintRecoveryKey func(recoveryKey string)
	// SessionReceived, when set, is told each megolm session whose room
	// key the machine stored (mautrix's OlmMachine.SessionReceived): the
	// inbox's KeyArrived, which retries at once the submissions that
	// waited for it. It must not block for long (it runs in the sync).
	SessionReceived func(ctx context.Context, room id.RoomID, session id.SessionID)
}

// Machine is the relay device's olm machine (matrix.Crypto). Open returns
// it at once; its setup (the crypto tables, the olm account, the device
// keys' upload) runs in the background, and every method waits for it.
type Machine struct {
	cli     *mautrix.Client
	log     *slog.Logger
	refused func(reason string, n int)
	opt     Options
	done    chan struct{}
	signed  chan struct{} // closed when the cross-signing step ended
	xsigned atomic.Bool   // the device is cross-signed by the user's self-signing key
	err     error         // setup's error, read after done
	// xerr is why the cross-signing step failed (Status's detail), never
	// a key.
	xerr atomic.Pointer[string]

	mach   *crypto.OlmMachine
	cstore *crypto.SQLCryptoStore
	ss     *sqlstatestore.SQLStateStore
	sqldb  interface{ Close() error }

	mu      sync.Mutex
	members map[id.RoomID]memberSnap // the members each room's outbound session was shared with
	// senders counts each sender's to-device events in the current
	// ToDeviceWindow (screen); window is when it began.
	senders map[id.UserID]int
	window  time.Time
	// pushed: an application-service transaction brought this device's
	// traffic (ProcessTransaction), so SyncDevice is not needed.
	pushed atomic.Bool
}

type memberSnap struct {
	users []id.UserID
	at    time.Time
}

// memberCheckEvery: how often Encrypt reads a room's joined members
// again (a change rotates the room's outbound session, so a member who
// left reads nothing newer and a new one gets a fresh key).
const memberCheckEvery = 15 * time.Second

var _ matrix.Crypto = (*Machine)(nil)

// Open starts the relay device's olm machine. The setup continues in the
// background; Err says how it ended. Errors (at once): none but a missing
// Client or Store.
func Open(ctx context.Context, opt Options) (matrix.Crypto, error) {
	if opt.Client == nil || opt.Store == nil {
		return nil, errors.New("e2ee: Client and Store are required")
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Machine{cli: opt.Client, log: log, refused: opt.OnRefused, opt: opt, done: make(chan struct{}), signed: make(chan struct{}),
		members: map[id.RoomID]memberSnap{}}
	go func() {
		defer close(m.signed)
		bg := context.WithoutCancel(ctx)
		m.err = m.setup(bg, opt.Store)
		close(m.done)
		if m.err != nil {
			log.Error("matrix encryption: the relay's device did not start; encrypted rooms are refused", "err", m.err)
			return
		}
		log.Info("matrix encryption ready", "device_id", m.cli.DeviceID, "identity_key", m.mach.OwnIdentity().IdentityKey)
		// Cross-signing after the device is usable: it never delays it.
		log.Info("matrix encryption: cross-signing the relay's device in the background")
		if err := m.selfSign(bg, opt.Store); err != nil {
			log.Warn("matrix encryption: the relay's device is not cross-signed: clients that exclude unverified devices send it no room keys", "err", err)
			why := err.Error()
			m.xerr.Store(&why)
			return
		}
		m.xsigned.Store(true)
		log.Info("matrix encryption: the relay's device is cross-signed")
	}()
	return m, nil
}

// errNoRecoveryKey: the store has no recovery key (a lookup, never made).
var errNoRecoveryKey = errors.New("no recovery key stored")

// selfSign cross-signs the relay's device (the mautrix bridges'
// self_sign): nothing when the homeserver already shows it signed by the
// user's self-signing key; with the stored recovery key, the
// cross-signing keys are read back from secret storage (SSSS) and sign
// the device; with none, new cross-signing keys and a recovery key are
// made and published (the homeserver asks for the account password:
// Options.Password), the recovery key stored and printed once. Errors:
// no password, keys the relay did not make, the homeserver's refusal.
func (m *Machine) selfSign(ctx context.Context, st store.MatrixCrypto) error {
	mach := m.mach
	if signed, hasKeys, err := m.deviceSigned(ctx); err != nil {
		return err
	} else if signed {
		return nil
	} else if rk, err := st.MatrixCryptoSecret(ctx, store.MatrixRecoveryKey, func() (string, error) { return "", errNoRecoveryKey }); err == nil {
		return mach.VerifyWithRecoveryKey(ctx, rk)
	} else if !errors.Is(err, errNoRecoveryKey) {
		return err
	} else if hasKeys && m.opt.Appservice == nil {
		return errors.New("the user has cross-signing keys that this relay did not make and no recovery key is stored: sign the device from a client that holds them")
	} else if hasKeys {
		m.log.Warn("matrix encryption: the application service's user has cross-signing keys and no recovery key for them is stored (a lost database?): replacing them with the application service's token")
		return m.selfSignNoPassword(ctx, st, m.opt.Appservice)
	}
	if m.opt.Password == "" && m.opt.Appservice == nil {
		return errors.New("publishing cross-signing keys needs the account password: in bot mode give --matrix-password-file (ACRELAY_MATRIX_PASSWORD_FILE)")
	}
	if m.opt.Password == "" {
		return m.selfSignNoPassword(ctx, st, nil)
	}
	rk, _, err := mach.GenerateAndUploadCrossSigningKeysWithPassword(ctx, m.opt.Password, "")
	if err != nil {
		return fmt.Errorf("publish cross-signing keys: %w", err)
	}
	if _, err := st.MatrixCryptoSecret(ctx, store.MatrixRecoveryKey, func() (string, error) { return rk, nil }); err != nil {
		return fmt.Errorf("store the recovery key: %w", err)
	}
	if m.opt.PrintRecoveryKey != nil {
		m.opt.PrintRecoveryKey(rk)
	}
	if err := mach.SignOwnDevice(ctx, mach.OwnIdentity()); err != nil {
		return fmt.Errorf("sign the device: %w", err)
	}
	return mach.SignOwnMasterKey(ctx)
}

// errPasswordNeeded: the homeserver asked the application service for
// user-interactive auth to publish the first cross-signing keys.
var errPasswordNeeded = errors.New("the homeserver asks for the account password (user-interactive auth) to publish cross-signing keys, which an application service has not: its device stays not cross-signed on this homeserver (a bot with --matrix-password-file can be)")

// selfSignNoPassword makes and publishes the application service user's
// first cross-signing keys without a password, where the homeserver
// allows it (MSC3967: no
// user-interactive auth while the user has no master key; Synapse does,
// Dendrite 0.13.8 answers 401 with a password stage): the public keys are
// published first, so a homeserver that refuses leaves nothing behind
// (no secret-storage key in the account data); then the private keys go
// to secret storage under a new recovery key, which is stored, printed
// once (Options.PrintRecoveryKey), and the device and the master key are
// signed. With as (the application service's client) the keys replace
// the user's existing ones, published with the application service's
// token (Synapse asks an application service for no user-interactive
// auth). Errors: errPasswordNeeded (the homeserver's 401), the
// homeserver's other refusals, the store's.
func (m *Machine) selfSignNoPassword(ctx context.Context, st store.MatrixCrypto, as *mautrix.Client) error {
	mach := m.mach
	keys, err := mach.GenerateCrossSigningKeys()
	if err != nil {
		return err
	}
	publish := func() error { return mach.PublishCrossSigningKeys(ctx, keys, nil) }
	if as != nil {
		publish = func() error {
			if err := publishWith(ctx, as, m.cli.UserID, keys); err != nil {
				return err
			}
			return mach.ImportCrossSigningKeys(keys.Seeds())
		}
	}
	if err := publish(); err != nil {
		if herr, ok := errors.AsType[mautrix.HTTPError](err); ok && herr.IsStatus(http.StatusUnauthorized) {
			return errPasswordNeeded
		}
		return fmt.Errorf("publish cross-signing keys: %w", err)
	}
	// From here the user has cross-signing keys: until the recovery key
	// is stored a failure leaves keys the relay cannot read back (the
	// warning at the next start says so).
	key, err := mach.SSSS.GenerateAndUploadKey(ctx, "")
	if err != nil {
		return fmt.Errorf("make the secret-storage key: %w", err)
	}
	if err := mach.UploadCrossSigningKeysToSSSS(ctx, key, keys); err != nil {
		return fmt.Errorf("store the cross-signing keys in secret storage: %w", err)
	}
	if err := mach.SSSS.SetDefaultKeyID(ctx, key.ID); err != nil {
		return fmt.Errorf("mark the secret-storage key default: %w", err)
	}
	rk := key.RecoveryKey()
	if _, err := st.MatrixCryptoSecret(ctx, store.MatrixRecoveryKey, func() (string, error) { return rk, nil }); err != nil {
		return fmt.Errorf("store the recovery key: %w", err)
	}
	if m.opt.PrintRecoveryKey != nil {
		m.opt.PrintRecoveryKey(rk)
	}
	if err := mach.SignOwnDevice(ctx, mach.OwnIdentity()); err != nil {
		return fmt.Errorf("sign the device: %w", err)
	}
	return mach.SignOwnMasterKey(ctx)
}

// publishWith publishes keys, the public cross-signing keys of user,
// through cli (the application service's token): the self-signing and
// user-signing keys signed by the master key (the device signs the master
// key afterwards, SignOwnMasterKey). Errors: the homeserver's.
func publishWith(ctx context.Context, cli *mautrix.Client, user id.UserID, keys *crypto.CrossSigningKeysCache) error {
	master := keys.MasterKey.PublicKey()
	key := func(usage id.CrossSigningUsage, pub id.Ed25519) mautrix.CrossSigningKeys {
		return mautrix.CrossSigningKeys{UserID: user, Usage: []id.CrossSigningUsage{usage},
			Keys: map[id.KeyID]id.Ed25519{id.NewKeyID(id.KeyAlgorithmEd25519, pub.String()): pub}}
	}
	req := &mautrix.UploadCrossSigningKeysReq[any]{Master: key(id.XSUsageMaster, master),
		SelfSigning: key(id.XSUsageSelfSigning, keys.SelfSigningKey.PublicKey()),
		UserSigning: key(id.XSUsageUserSigning, keys.UserSigningKey.PublicKey())}
	for _, k := range []*mautrix.CrossSigningKeys{&req.SelfSigning, &req.UserSigning} {
		sig, err := keys.MasterKey.SignJSON(*k)
		if err != nil {
			return err
		}
		k.Signatures = signatures.NewSingleSignature(user, id.KeyAlgorithmEd25519, master.String(), sig)
	}
	return cli.UploadCrossSigningKeys(ctx, req, nil)
}

// deviceSigned asks the homeserver whether the relay's device carries a
// signature of the user's self-signing key, and whether the user has
// cross-signing keys at all.
func (m *Machine) deviceSigned(ctx context.Context) (signed, hasKeys bool, err error) {
	resp, err := m.cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: map[id.UserID]mautrix.DeviceIDList{m.cli.UserID: {m.cli.DeviceID}}})
	if err != nil {
		return false, false, fmt.Errorf("query own keys: %w", err)
	}
	ssk, ok := resp.SelfSigningKeys[m.cli.UserID]
	_, master := resp.MasterKeys[m.cli.UserID]
	if !ok {
		return false, master, nil
	}
	dev := resp.DeviceKeys[m.cli.UserID][m.cli.DeviceID]
	for kid := range ssk.Keys {
		if _, s := dev.Signatures[m.cli.UserID][kid]; s {
			return true, true, nil
		}
	}
	return false, true, nil
}

// CrossSigned waits for the cross-signing step and reports whether the
// device is cross-signed.
func (m *Machine) CrossSigned(ctx context.Context) bool {
	select {
	case <-m.signed:
		return m.xsigned.Load()
	case <-ctx.Done():
		return false
	}
}

// zlog turns mautrix's zerolog lines (warnings and worse) into slog
// records: mautrix logs ids and reasons, never keys.
func zlog(log *slog.Logger) zerolog.Logger {
	return zerolog.New(slogWriter{log}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
}

type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	var m map[string]any
	if json.Unmarshal(bytes.TrimSpace(p), &m) != nil {
		w.log.Warn("mautrix crypto", "line", string(p))
		return len(p), nil
	}
	msg, _ := m["message"].(string)
	level := slog.LevelWarn
	if l, _ := m["level"].(string); l == "error" || l == "fatal" || l == "panic" {
		level = slog.LevelError
	}
	delete(m, "message")
	delete(m, "level")
	delete(m, "time")
	args := make([]any, 0, 2*len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		args = append(args, k, m[k])
	}
	w.log.Log(context.Background(), level, "mautrix crypto: "+msg, args...)
	return len(p), nil
}

func (m *Machine) setup(ctx context.Context, st store.MatrixCrypto) error {
	who, err := m.cli.Whoami(ctx)
	if err != nil {
		return fmt.Errorf("whoami: %w", err)
	}
	if who.DeviceID == "" {
		return errors.New("the access token has no device (log the bot in with a device, or use application-service login)")
	}
	if who.UserID != m.cli.UserID {
		return fmt.Errorf("the access token belongs to %s, not %s", who.UserID, m.cli.UserID)
	}
	m.cli.DeviceID = who.DeviceID
	pk, err := st.MatrixCryptoSecret(ctx, store.MatrixPickleKey, func() (string, error) {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		return base64.RawStdEncoding.EncodeToString(b), nil
	})
	if err != nil {
		return err
	}
	pickle, err := base64.RawStdEncoding.DecodeString(pk)
	if err != nil || len(pickle) != 32 {
		return errors.New("the stored pickle key is not 32 bytes of base64")
	}
	sqldb, dialect, err := st.MatrixCryptoDB(ctx)
	if err != nil {
		return err
	}
	db, err := dbutil.NewWithDB(sqldb, dialect)
	if err != nil {
		sqldb.Close()
		return err
	}
	m.sqldb = sqldb
	zl := zlog(m.log)
	// One olm account per (user, device): a new access token (a new
	// device) starts a new account instead of reusing another device's.
	account := m.cli.UserID.String() + "|" + m.cli.DeviceID.String()
	m.cstore = crypto.NewSQLCryptoStore(db, dbutil.ZeroLogger(zl), account, m.cli.DeviceID, pickle)
	if err := m.cstore.DB.Upgrade(ctx); err != nil {
		return fmt.Errorf("crypto store upgrade: %w", err)
	}
	m.ss = sqlstatestore.NewSQLStateStore(db, dbutil.ZeroLogger(zl), false)
	if err := m.ss.Upgrade(ctx); err != nil {
		return fmt.Errorf("state store upgrade: %w", err)
	}
	m.mach = crypto.NewOlmMachine(m.cli, &zl, m.cstore, m.ss)
	if f := m.opt.SessionReceived; f != nil {
		m.mach.SessionReceived = func(ctx context.Context, room id.RoomID, session id.SessionID, _ uint32) { f(ctx, room, session) }
	}
	if err := m.mach.Load(ctx); err != nil {
		return fmt.Errorf("load olm account: %w", err)
	}
	return m.publishKeys(ctx)
}

// publishKeys uploads the device keys and one-time keys unless the
// homeserver has this account's keys already (then it checks they match).
func (m *Machine) publishKeys(ctx context.Context) error {
	resp, err := m.cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: map[id.UserID]mautrix.DeviceIDList{m.cli.UserID: {m.cli.DeviceID}}})
	if err != nil {
		return fmt.Errorf("query own device keys: %w", err)
	}
	dev, ok := resp.DeviceKeys[m.cli.UserID][m.cli.DeviceID]
	shared := m.mach.GetAccount().Shared
	switch {
	case !ok || len(dev.Keys) == 0:
		if shared {
			return errors.New("the device's keys are gone from the homeserver although they were uploaded: log the bot in again (a new device)")
		}
		return m.mach.ShareKeys(ctx, -1)
	case !shared:
		return errors.New("the homeserver has keys for this device that this store did not make (the device was used by another client): log the bot in again (a new device)")
	case dev.Keys.GetEd25519(m.cli.DeviceID) != m.mach.OwnIdentity().SigningKey:
		return errors.New("the homeserver's signing key for this device differs from the stored one: log the bot in again (a new device)")
	}
	return nil
}

// AppserviceDevice returns a client of the application service's sender
// with a device of its own, for the olm machine and its /sync
// (SyncDevice): made once with m.login.application_service (the as_token
// of asCli authenticates it; Dendrite 0.13.8 has it, and neither MSC3202
// nor MSC4190, so the device's to-device traffic comes through a /sync of
// its own), its device id and access token kept as a secret of the
// deployment (store.MatrixAppserviceDevice), reused at every start.
// Before the first login the sender's account is registered
// (m.login.application_service, as mautrix bridges' EnsureRegistered
// does; M_USER_IN_USE is fine): Synapse, unlike Dendrite, never creates
// the sender_localpart's account, and refuses every token of a device
// of an account it does not have (M_UNKNOWN_TOKEN).
// Errors: the homeserver's refusal of the registration or the login, a
// stored token it no longer accepts.
func AppserviceDevice(ctx context.Context, asCli *mautrix.Client, st store.MatrixCrypto) (*mautrix.Client, error) {
	raw, err := st.MatrixCryptoSecret(ctx, store.MatrixAppserviceDevice, func() (string, error) {
		_, err := asCli.MakeRequest(ctx, http.MethodPost, asCli.BuildClientURL("v3", "register"), &mautrix.ReqRegister[any]{
			Username: asCli.UserID.Localpart(), Type: mautrix.AuthTypeAppservice, InhibitLogin: true}, nil)
		if err != nil && !errors.Is(err, mautrix.MUserInUse) {
			return "", fmt.Errorf("registering the application service's user: %w", err)
		}
		resp, err := asCli.Login(ctx, &mautrix.ReqLogin{Type: mautrix.AuthTypeAppservice,
			Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: asCli.UserID.String()},
			InitialDeviceDisplayName: "acrelay"})
		if err != nil {
			return "", fmt.Errorf("m.login.application_service: %w", err)
		}
		b, _ := json.Marshal(map[string]string{"device_id": resp.DeviceID.String(), "access_token": resp.AccessToken})
		return string(b), nil
	})
	if err != nil {
		return nil, err
	}
	var d struct {
		DeviceID    id.DeviceID `json:"device_id"`
		AccessToken string      `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil || d.AccessToken == "" {
		return nil, errors.New("the stored application-service device does not parse")
	}
	cli, err := matrix.NewClient(asCli.HomeserverURL.String(), asCli.UserID, d.AccessToken)
	if err != nil {
		return nil, err
	}
	cli.DeviceID = d.DeviceID
	return cli, nil
}

// deviceSyncFilter: no room data (the homeserver pushes the rooms'
// events to the application service); to-device events, device-list
// changes and one-time-key counts come regardless.
const deviceSyncFilter = `{"room":{"rooms":[],"account_data":{"types":[]}},"presence":{"types":[]},"account_data":{"types":[]}}`

// deviceSyncBackoff: the device's /sync after errors, 1 s doubling to 30 s.
var deviceSyncBackoff = backoff.Policy{Initial: time.Second, Max: 30 * time.Second}

// SyncDevice long-polls /sync as the machine's device (application-service
// mode) and hands each answer to the olm machine (ProcessSync), until ctx
// ends or a transaction brought the device's traffic (ProcessTransaction:
// Synapse answers an application service's sender's /sync with 500 and
// pushes instead); it backs off (1 s doubling to 30 s) on errors.
func (m *Machine) SyncDevice(ctx context.Context) error {
	if err := m.ready(ctx); err != nil {
		return err
	}
	since, failures := "", 0
	for ctx.Err() == nil {
		if m.pushed.Load() {
			m.log.Info("matrix: the homeserver pushes the device's to-device traffic in its application-service transactions (MSC2409/MSC3202): the device's own /sync ends")
			return nil
		}
		resp, err := m.cli.SyncRequest(ctx, 30000, since, deviceSyncFilter, since == "", event.PresenceOffline)
		if err != nil {
			if ctx.Err() != nil || m.pushed.Load() {
				continue
			}
			failures++
			wait := deviceSyncBackoff.Ceiling(failures)
			switch {
			case failures <= 3:
				m.log.Warn("matrix device sync failed", "failures", failures, "retry_in", wait, "err", err)
			case failures == 4:
				// Synapse answers 500 for as long as it runs, and pushes
				// the traffic instead once configured: one line, not one
				// every 30 s.
				m.log.Warn("matrix device sync keeps failing; retried every 30 s, logged at debug until it works. On Synapse, which serves no /sync to an application service's sender, the device's traffic must come in the transactions: experimental_features msc2409_to_device_messages_enabled and msc3202_transaction_extensions (docs/matrix.md, \"Setup on Synapse\")",
					"failures", failures, "err", err)
			default:
				m.log.Debug("matrix device sync failed", "failures", failures, "retry_in", wait, "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			continue
		}
		if failures > 3 {
			m.log.Info("matrix device sync works again", "failures", failures)
		}
		failures = 0
		m.ProcessSync(ctx, resp, since)
		since = resp.NextBatch
	}
	return nil
}

// ProcessTransaction hands the olm machine what an application-service
// transaction (the JSON body of PUT /_matrix/app/v1/transactions/{txnId})
// carries for this machine's device, as SyncDevice hands it a /sync: the
// to-device events addressed to the device ("de.sorunome.msc2409.to_device"
// or "to_device", MSC2409/MSC4203: each names its to_user_id and
// to_device_id), device-list changes ("org.matrix.msc3202.device_lists"),
// and the device's one-time-key counts (MSC3202; like /sync's, the unused
// fallback key types are not read). Synapse refuses /sync to an application service's sender
// user and pushes these instead when the registration asks for them
// (receive_ephemeral, org.matrix.msc3202) and its experimental_features
// allow (msc2409_to_device_messages_enabled,
// msc3202_transaction_extensions); Dendrite 0.13.8 pushes none of them. A
// transaction without them changes nothing. To-device events go through
// the same screen as /sync's (flood, olm for another device, malformed).
// It waits for the machine's setup, so that room keys are stored before
// the transaction is acknowledged; errors: the setup's failure, ctx's end
// — the caller answers the transaction with an error so that the
// homeserver sends it again. Device traffic that does not parse
// (ParseDeviceTraffic) is dropped, logged and counted as
// ReasonToDeviceMalformed, and is no error: the room events go on.
func (m *Machine) ProcessTransaction(ctx context.Context, body []byte) error {
	user, device := m.cli.UserID, m.cli.DeviceID
	t, err := ParseDeviceTraffic(body, user, device)
	if err != nil {
		// A homeserver's malformed device traffic: dropped, logged and
		// counted, never a reason to refuse the room events with it.
		m.log.Warn("matrix to-device events refused", "reason", ReasonToDeviceMalformed, "count", 1, "err", err)
		if m.refused != nil {
			m.refused(ReasonToDeviceMalformed, 1)
		}
		return nil
	}
	if !t.Any {
		return nil
	}
	if err := m.ready(ctx); err != nil {
		return err
	}
	m.pushed.Store(true)
	resp := &mautrix.RespSync{}
	resp.ToDevice.Events = t.ToDevice
	if t.DeviceLists != nil {
		resp.DeviceLists = *t.DeviceLists
	}
	m.screen(resp)
	m.mach.HandleDeviceLists(ctx, &resp.DeviceLists, "")
	for _, ev := range resp.ToDevice.Events {
		ev.Type.Class = event.ToDeviceEventType
		if err := ev.Content.ParseRaw(ev.Type); err != nil {
			m.log.Warn("matrix to-device event does not parse", "type", ev.Type.Type, "sender", ev.Sender, "err", err)
			continue
		}
		m.mach.HandleToDeviceEvent(ctx, ev)
	}
	// Only the device's own counts: counts absent from a transaction
	// are not zero (a zero would upload keys at every transaction).
	if t.OTKCount != nil {
		m.mach.HandleOTKCounts(ctx, t.OTKCount)
	}
	m.mach.MarkOlmHashSavePoint(ctx)
	return nil
}

// ready waits for the setup.
func (m *Machine) ready(ctx context.Context) error {
	select {
	case <-m.done:
		if m.err != nil {
			return fmt.Errorf("%w: %w", matrix.ErrEncryptionUnavailable, m.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Err waits for the setup and returns its error.
func (m *Machine) Err(ctx context.Context) error { return m.ready(ctx) }

// encryption makes sure the state store holds room's m.room.encryption
// content (its rotation settings), reading it from the homeserver once.
func (m *Machine) encryption(ctx context.Context, room id.RoomID) error {
	if enc, err := m.ss.GetEncryptionEvent(ctx, room); err == nil && enc != nil {
		return nil
	}
	var c event.EncryptionEventContent
	if err := m.cli.StateEvent(ctx, room, event.StateEncryption, "", &c); err != nil {
		return fmt.Errorf("read m.room.encryption: %w", err)
	}
	return m.ss.SetEncryptionEvent(ctx, room, &c)
}

// Encrypt implements matrix.Crypto.
func (m *Machine) Encrypt(ctx context.Context, room id.RoomID, typ event.Type, content any) (*event.EncryptedEventContent, error) {
	if err := m.ready(ctx); err != nil {
		return nil, err
	}
	if err := m.encryption(ctx, room); err != nil {
		return nil, err
	}
	users, err := m.checkMembers(ctx, room)
	if err != nil {
		return nil, err
	}
	enc, err := m.mach.EncryptMegolmEvent(ctx, room, typ, content)
	if crypto.IsShareError(err) {
		if users == nil {
			if users, err = m.joined(ctx, room); err != nil {
				return nil, err
			}
		}
		if err := m.mach.ShareGroupSession(ctx, room, users); err != nil {
			return nil, fmt.Errorf("share the room key: %w", err)
		}
		enc, err = m.mach.EncryptMegolmEvent(ctx, room, typ, content)
	}
	return enc, err
}

// joined reads room's joined members from the homeserver and records
// them in the state store (device-list changes rotate the sessions of the
// rooms a user shares with the relay).
func (m *Machine) joined(ctx context.Context, room id.RoomID) ([]id.UserID, error) {
	resp, err := m.cli.JoinedMembers(ctx, room)
	if err != nil {
		return nil, fmt.Errorf("joined members: %w", err)
	}
	users := slices.Sorted(maps.Keys(resp.Joined))
	for _, u := range users {
		_ = m.ss.SetMembership(ctx, room, u, event.MembershipJoin)
	}
	m.mu.Lock()
	m.members[room] = memberSnap{users: users, at: time.Now()}
	m.mu.Unlock()
	return users, nil
}

// checkMembers reads room's members again when the last read is older
// than memberCheckEvery, and drops the room's outbound session when they
// changed; it returns them when it read them.
func (m *Machine) checkMembers(ctx context.Context, room id.RoomID) ([]id.UserID, error) {
	m.mu.Lock()
	prev, ok := m.members[room]
	m.mu.Unlock()
	if ok && time.Since(prev.at) < memberCheckEvery {
		return nil, nil
	}
	users, err := m.joined(ctx, room)
	if err != nil {
		return nil, err
	}
	if ok && !slices.Equal(prev.users, users) {
		if err := m.cstore.RemoveOutboundGroupSession(ctx, room); err != nil {
			return nil, err
		}
	}
	return users, nil
}

// Decrypt implements matrix.Crypto.
func (m *Machine) Decrypt(ctx context.Context, ev *event.Event) (*event.Event, error) {
	if err := m.ready(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", matrix.ErrUndecryptable, err)
	}
	if c, ok := ev.Content.Parsed.(*event.EncryptedEventContent); !ok || c.Algorithm != id.AlgorithmMegolmV1 || c.SessionID == "" || len(c.MegolmCiphertext) == 0 {
		return nil, fmt.Errorf("%w: %s: not a megolm m.room.encrypted content", matrix.ErrUndecryptable, matrix.ReasonMalformed)
	}
	dec, err := m.mach.DecryptMegolmEvent(ctx, ev)
	if err == nil {
		return dec, nil
	}
	reason := matrix.ReasonOther
	switch {
	case errors.Is(err, crypto.ErrNoSessionFound), errors.Is(err, crypto.ErrGroupSessionWithheld):
		reason = matrix.ReasonNoSession
	case errors.Is(err, crypto.ErrDuplicateMessageIndex):
		reason = matrix.ReasonReplay
	case errors.Is(err, crypto.ErrCorruptedMegolmPayload), errors.Is(err, crypto.ErrWrongRoom), errors.Is(err, crypto.ErrIncorrectEncryptedContentType):
		reason = matrix.ReasonMalformed
	}
	return nil, fmt.Errorf("%w: %s: %w", matrix.ErrUndecryptable, reason, err)
}

// ProcessSync implements matrix.Crypto.
func (m *Machine) ProcessSync(ctx context.Context, resp *mautrix.RespSync, since string) {
	if m.ready(ctx) != nil {
		return
	}
	m.screen(resp)
	m.mach.ProcessSyncResponse(ctx, resp, since)
}

// screen drops the to-device events the olm machine must not see: olm
// messages for another device, malformed m.room.encrypted ones, and a
// sender's events beyond MaxToDevicePerSender within ToDeviceWindow; each
// kind is logged once per sync with its count and counted.
func (m *Machine) screen(resp *mautrix.RespSync) {
	own := m.mach.OwnIdentity().IdentityKey
	m.mu.Lock()
	defer m.mu.Unlock()
	if now := time.Now(); m.senders == nil || now.Sub(m.window) >= ToDeviceWindow {
		m.senders, m.window = map[id.UserID]int{}, now
	}
	per := m.senders
	refused := map[string]int{}
	kept := resp.ToDevice.Events[:0]
	for _, ev := range resp.ToDevice.Events {
		if ev == nil {
			continue
		}
		per[ev.Sender]++
		if per[ev.Sender] > MaxToDevicePerSender {
			refused[ReasonToDeviceFlood]++
			continue
		}
		if ev.Type.Type == event.ToDeviceEncrypted.Type {
			var c event.EncryptedEventContent
			if err := json.Unmarshal(ev.Content.VeryRaw, &c); err != nil || c.Algorithm != id.AlgorithmOlmV1 {
				refused[ReasonToDeviceMalformed]++
				continue
			}
			if _, ok := c.OlmCiphertext[own]; !ok {
				refused[ReasonOlmNotForDevice]++
				continue
			}
		}
		kept = append(kept, ev)
	}
	resp.ToDevice.Events = kept
	for _, reason := range slices.Sorted(maps.Keys(refused)) {
		n := refused[reason]
		m.log.Warn("matrix to-device events refused", "reason", reason, "count", n)
		if m.refused != nil {
			m.refused(reason, n)
		}
	}
}

// HandleState implements matrix.Crypto.
func (m *Machine) HandleState(ctx context.Context, ev *event.Event) {
	if m.ready(ctx) != nil {
		return
	}
	mautrix.UpdateStateStore(ctx, m.ss, ev)
	if ev.Type == event.StateMember {
		m.mach.HandleMemberEvent(ctx, ev)
		m.mu.Lock()
		delete(m.members, ev.RoomID) // read them again before the next send
		m.mu.Unlock()
	}
}

// RequestKey implements matrix.Crypto.
func (m *Machine) RequestKey(ctx context.Context, ev *event.Event) {
	if m.ready(ctx) != nil {
		return
	}
	c, ok := ev.Content.Parsed.(*event.EncryptedEventContent)
	if !ok {
		return
	}
	// The sender's device, where the (deprecated, still sent) field names
	// it; every device of the sender otherwise.
	//lint:ignore SA1019 a key request goes to the device that made the session when it is known
	dev := c.DeviceID
	if dev == "" {
		dev = "*"
	}
	if err := m.mach.SendRoomKeyRequest(ctx, ev.RoomID, c.SenderKey, c.SessionID, "", map[id.UserID][]id.DeviceID{
		ev.Sender: {dev}, m.cli.UserID: {"*"}}); err != nil {
		m.log.Warn("matrix room key request not sent", "room_id", ev.RoomID, "session_id", c.SessionID, "err", err)
	}
}

// Status implements matrix.Crypto.
func (m *Machine) Status(ctx context.Context) matrix.CryptoStatus {
	select {
	case <-m.done:
	default:
		return matrix.CryptoStatus{DeviceID: m.cli.DeviceID.String(), Detail: "the relay's device is starting"}
	}
	if m.err != nil {
		return matrix.CryptoStatus{DeviceID: m.cli.DeviceID.String(), Detail: "the relay's device did not start: " + m.err.Error()}
	}
	st := matrix.CryptoStatus{DeviceID: m.cli.DeviceID.String(), Ready: true, CrossSigned: m.xsigned.Load()}
	if st.CrossSigned {
		st.Detail = "ready; the device is cross-signed by the relay's user"
	} else {
		st.Detail = "ready; the device is not cross-signed (clients that exclude unverified devices send it no keys)"
		if why := m.xerr.Load(); why != nil {
			st.Detail += ": " + *why
		}
	}
	return st
}

// Close waits for the setup and closes the machine's database handle
// (the store itself stays open). The machine is not used after.
func (m *Machine) Close() error {
	<-m.done
	if m.sqldb != nil {
		return m.sqldb.Close()
	}
	return nil
}
