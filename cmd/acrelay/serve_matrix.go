package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/couriers/matrix/e2ee"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/backoff"
	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
)

// The Matrix courier's wiring in serve (spec/matrix.md): its flags, its
// client, and the runner, inbox, binder and application-service listener
// runServe starts. The `acrelay matrix` commands are in matrix_cmd.go.

// matrixConfig is the Matrix courier's configuration (spec/matrix.md):
// application-service mode with a registration file (recommended), or bot
// mode with a user id and access token.
type matrixConfig struct {
	Homeserver     string
	Registration   string
	AppserviceAddr string
	UserID         string
	AccessToken    string // secret: flag, ACRELAY_MATRIX_ACCESS_TOKEN or its _FILE
	// PasswordFile holds the bot's account password, for the
	// homeserver's user-interactive auth when the relay first publishes
	// its cross-signing keys (encrypted rooms); read at start, never
	// logged.
	PasswordFile string
}

func addMatrixFlags(fs *pflag.FlagSet, c *matrixConfig) {
	fs.StringVar(&c.Homeserver, "matrix-homeserver", envOr("ACRELAY_MATRIX_HOMESERVER", ""), "enable the Matrix courier against this homeserver URL (ACRELAY_MATRIX_HOMESERVER)")
	fs.StringVar(&c.Registration, "matrix-registration", envOr("ACRELAY_MATRIX_REGISTRATION", ""), "application-service mode: the registration YAML (ACRELAY_MATRIX_REGISTRATION; make one with `acrelay matrix registration`)")
	fs.StringVar(&c.AppserviceAddr, "matrix-appservice-addr", envOr("ACRELAY_MATRIX_APPSERVICE_ADDR", ""), "listen address of the application-service API (ACRELAY_MATRIX_APPSERVICE_ADDR; default: the host:port of the registration's url)")
	fs.StringVar(&c.UserID, "matrix-user-id", envOr("ACRELAY_MATRIX_USER_ID", ""), "bot mode: the bot's Matrix user id (ACRELAY_MATRIX_USER_ID)")
	fs.StringVar(&c.AccessToken, "matrix-access-token", "", "bot mode: the bot's access token (prefer ACRELAY_MATRIX_ACCESS_TOKEN or ACRELAY_MATRIX_ACCESS_TOKEN_FILE)")
	// A secret: applyEnv reads it (or its _FILE), config print redacts it.
	_ = fs.SetAnnotation("matrix-access-token", secretEnvAnnotation, []string{"ACRELAY_MATRIX_ACCESS_TOKEN"})
	fs.StringVar(&c.PasswordFile, "matrix-password-file", envOr("ACRELAY_MATRIX_PASSWORD_FILE", ""), "bot mode with encrypted rooms: a file holding the bot's account password, which the homeserver asks for when the relay first cross-signs its device (ACRELAY_MATRIX_PASSWORD_FILE)")
}

// client returns the courier's Matrix client, the registration in
// application-service mode (nil in bot mode), or nil when Matrix is off.
func (c *matrixConfig) client(ctx context.Context) (*mautrix.Client, *appservice.Registration, error) {
	if c.Homeserver == "" {
		if c.Registration != "" || c.UserID != "" {
			return nil, nil, errors.New("--matrix-registration and --matrix-user-id need --matrix-homeserver")
		}
		return nil, nil, nil
	}
	if c.AccessToken == "" {
		tok, err := secretFromEnv("ACRELAY_MATRIX_ACCESS_TOKEN")
		if err != nil {
			return nil, nil, err
		}
		c.AccessToken = tok
	}
	switch {
	case c.Registration != "" && c.UserID == "":
		reg, err := appservice.LoadRegistration(c.Registration)
		if err != nil {
			return nil, nil, fmt.Errorf("--matrix-registration: %w", err)
		}
		if reg.AppToken == "" || reg.ServerToken == "" || reg.SenderLocalpart == "" || reg.URL == "" {
			return nil, nil, errors.New("--matrix-registration: id, url, as_token, hs_token and sender_localpart are required")
		}
		cli, err := matrix.NewClient(c.Homeserver, "", reg.AppToken)
		if err != nil {
			return nil, nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		who, err := cli.Whoami(wctx) // the sender's full user id
		if err != nil {
			return nil, nil, fmt.Errorf("matrix: the homeserver does not accept the as_token: %w", err)
		}
		cli.UserID = who.UserID
		return cli, reg, nil
	case c.Registration == "" && c.UserID != "" && c.AccessToken != "":
		cli, err := matrix.NewClient(c.Homeserver, id.UserID(c.UserID), c.AccessToken)
		return cli, nil, err
	}
	return nil, nil, errors.New("matrix: give --matrix-registration (application service) or --matrix-user-id with an access token (bot), not both")
}

// matrixServices are the parts `acrelay serve` runs.
type matrixServices struct {
	runner *couriers.Runner
	inbox  *matrix.Inbox
	binder *matrix.Binder
	reg    *appservice.Registration
	cli    *mautrix.Client
	ln     net.Listener // the application-service listener, bound by openMatrix
	log    *slog.Logger
	// inboxJob and syncJob run the inbox and the bot's /sync on one
	// process of the relay at a time (relay-wide leases).
	inboxJob, syncJob *lease.Single
	// undecryptable counts the m.room.encrypted events it
	// could not read, toDeviceRefused the to-device events it dropped,
	// by reason.
	courier         *matrix.Courier
	cstore          store.MatrixCrypto // nil: no encryption (see cryptoStore)
	password        string             // --matrix-password-file's content
	out             io.Writer          // serve's standard output: the recovery key is printed there once
	cryptoJob       *lease.Single      // with cstore: the lease over the relay's Matrix device (underCrypto)
	undecryptable   *prometheus.CounterVec
	toDeviceRefused *prometheus.CounterVec
	// device is the olm machine while this process drives the relay's
	// Matrix device (underCrypto), for the device traffic Synapse pushes
	// in application-service transactions; nil otherwise.
	device atomic.Pointer[deviceTraffic]
}

// deviceTraffic takes the device traffic of an application-service
// transaction (e2ee.Machine.ProcessTransaction).
type deviceTraffic interface {
	ProcessTransaction(ctx context.Context, body []byte) error
}

// appserviceSink takes the pushed transactions: their room events go to
// the inbox (on any process), their device traffic — the to-device
// events, device-list changes and one-time-key counts Synapse pushes
// (MSC2409/MSC3202) — to the olm machine of the process that drives the
// relay's Matrix device (lease matrix-crypto).
type appserviceSink struct{ m *matrixServices }

func (s appserviceSink) Accept(ctx context.Context, evs []json.RawMessage) error {
	return s.m.inbox.Accept(ctx, evs)
}

// AcceptDeviceTraffic implements relay.DeviceTrafficSink. A process
// without the device refuses a transaction that carries to-device events
// or device-list changes (503: the homeserver sends it again, room keys
// are never dropped); one-time-key counts alone it lets pass (the next
// transaction carries them again). Without encryption nothing takes them.
func (s appserviceSink) AcceptDeviceTraffic(ctx context.Context, body []byte) error {
	if s.m.cstore == nil {
		return nil
	}
	if d := s.m.device.Load(); d != nil {
		return (*d).ProcessTransaction(ctx, body)
	}
	t, err := e2ee.ParseDeviceTraffic(body, s.m.cli.UserID, "")
	if err == nil && (len(t.ToDevice) > 0 || t.DeviceLists != nil) { // the holder drops what does not parse, so may this one
		return errors.New("this process does not drive the relay's Matrix device (lease matrix-crypto) yet: the homeserver sends the transaction again")
	}
	return nil
}

// cryptoStore is the store the relay device's encryption keeps its state
// in, or nil (logged) when the relay takes no part in encrypted rooms:
// this binary has no encryption (built without -tags goolm); then
// encrypted rooms are refused, loudly, never sent plaintext.
func cryptoStore(st store.Store, log *slog.Logger) store.MatrixCrypto {
	if !e2ee.Built {
		log.Warn("matrix: this acrelay has no end-to-end encryption (built without -tags goolm): encrypted rooms are refused, never sent plaintext")
		return nil
	}
	mc, ok := st.(store.MatrixCrypto)
	if !ok {
		log.Error("matrix: this store cannot keep Matrix crypto state: encrypted rooms are refused")
		return nil
	}
	return mc
}

// underCrypto runs the whole Matrix courier of a relay with encryption —
// its olm machine, the runner, the inbox and the bot's /sync — on the one
// process that holds the relay-wide lease matrix-crypto, until that lease
// is lost or ctx ends: one Matrix device is never driven by two processes
// at once (two olm machines on one device would fork its megolm
// ratchets and one-time keys). Each holder opens the machine afresh from
// the store; its setup (keys upload) runs in the background.
func (m *matrixServices) underCrypto(ctx context.Context) error {
	dev := m.cli
	var asCli *mautrix.Client // the application service's own client, for cross-signing keys (e2ee.Options.Appservice)
	if m.reg != nil {
		asCli = m.cli
		// Application-service mode: a device of the sender's own, from
		// m.login.application_service, with its own /sync (SyncDevice;
		// Synapse pushes its traffic instead: appserviceSink).
		var err error
		if dev, err = e2ee.AppserviceDevice(ctx, m.cli, m.cstore); err != nil {
			m.log.Error("matrix: the application service's device could not be made: encrypted rooms get nothing", "err", err)
			return err
		}
	}
	cr, err := e2ee.Open(ctx, e2ee.Options{Client: dev, Store: m.cstore, Logger: m.log.With("component", "matrix-e2ee"),
		OnRefused:       func(reason string, n int) { m.toDeviceRefused.WithLabelValues(reason).Add(float64(n)) },
		Password:        m.password,
		Appservice:      asCli,
		SessionReceived: m.inbox.KeyArrived,
		PrintRecoveryKey: func(rk string) {
			if m.out != nil {
				fmt.Fprintf(m.out, "matrix cross-signing recovery key (shown once; kept in the database, backed up with it): %s\n", rk)
			}
		}})
	if err != nil {
		return err
	}
	if c, ok := cr.(io.Closer); ok {
		defer c.Close()
	}
	m.log.Info("matrix: this process drives the relay's Matrix device (lease matrix-crypto)")
	m.courier.Crypto, m.inbox.Crypto = cr, cr
	if d, ok := cr.(deviceTraffic); ok {
		m.device.Store(&d)
		defer m.device.Store(nil)
	}
	p := newParts(ctx)
	p.run("courier", m.runner.Run)
	p.run("inbox", m.inbox.Run)
	if m.reg == nil {
		p.run("sync", m.inbox.Sync)
	} else if d, ok := cr.(interface{ SyncDevice(context.Context) error }); ok {
		p.run("device sync", func(ctx context.Context) error {
			// A device whose encryption did not start (logged; encrypted
			// rooms are refused) has nothing to sync: the rest goes on.
			if err := d.SyncDevice(ctx); !errors.Is(err, matrix.ErrEncryptionUnavailable) {
				return err
			}
			return nil
		})
	}
	return p.wait()
}

// registerMetrics registers the Matrix courier's own metrics.
func (m *matrixServices) registerMetrics(reg prometheus.Registerer) {
	if m != nil {
		reg.MustRegister(m.undecryptable, m.toDeviceRefused)
	}
}

// openMatrix builds the Matrix courier, inbox and binder; nil when the
// courier is off. base gives the runner's holder, lease, logger and
// OnResult; openMatrix sets its backoff and refresh.
func openMatrix(ctx context.Context, c matrixConfig, st store.Store, public string, base couriers.Options) (*matrixServices, error) {
	logger := base.Logger
	cli, reg, err := c.client(ctx)
	if err != nil || cli == nil {
		return nil, err
	}
	host := ""
	if u, err := url.Parse(c.Homeserver); err == nil {
		host = u.Host
	}
	log := logger.With("courier", matrix.Name)
	toDeviceRefused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "acrelay_matrix_to_device_refused_total",
		Help: "to-device events refused before the relay device's olm machine saw them, by reason: olm_not_for_this_device, to_device_malformed, to_device_flood."},
		[]string{"reason"})
	for _, r := range []string{e2ee.ReasonOlmNotForDevice, e2ee.ReasonToDeviceMalformed, e2ee.ReasonToDeviceFlood} {
		toDeviceRefused.WithLabelValues(r)
	}
	cstore := cryptoStore(st, log)
	courier := &matrix.Courier{Store: st, Client: cli, PublicURL: public, Host: host, Logger: log, Started: time.Now()}
	base.Backoff, base.Refresh = couriers.Backoff{Initial: time.Second, Max: 2 * time.Minute}, 10*time.Second
	runner := couriers.NewRunner(st, courier, base)
	undecryptable := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "acrelay_matrix_undecryptable_total",
		Help: "m.room.encrypted room events the Matrix courier could not decrypt (each attempt), by reason: no_session, malformed, replayed_index, no_encryption, decrypt_failed."},
		[]string{"reason"})
	for _, r := range []string{matrix.ReasonNoSession, matrix.ReasonMalformed, matrix.ReasonReplay, matrix.ReasonNoEncryption, matrix.ReasonOther} {
		undecryptable.WithLabelValues(r)
	}
	m := &matrixServices{runner: runner, courier: courier, reg: reg, cli: cli, log: log, cstore: cstore, undecryptable: undecryptable, toDeviceRefused: toDeviceRefused,
		// Application-service mode: any process takes the pushes; only the
		// one driving the device decrypts, when answering.
		inbox: &matrix.Inbox{Store: st, Ingest: ingest.New(st, ingest.Options{}), Client: cli, Logger: log, DeferDecrypt: reg != nil && cstore != nil,
			OnUndecryptable: func(reason string) { undecryptable.WithLabelValues(reason).Inc() }},
		binder: &matrix.Binder{Store: st, Client: cli, Refresh: runner.Refresh, CanEncrypt: cstore != nil, Leases: st, Appservice: reg != nil}}
	if cstore != nil {
		m.binder.Device = func(ctx context.Context) (id.UserID, id.DeviceID, error) {
			return e2ee.RelayDevice(ctx, cli, reg != nil, cstore)
		}
	}
	id := base.Identity
	if id == nil {
		id = &lease.Identity{ID: base.Holder}
	}
	m.inboxJob = lease.NewSingle(st, lease.Options{Name: "matrix-inbox", Holder: id, TTL: base.LeaseTTL, Logger: log})
	m.syncJob = lease.NewSingle(st, lease.Options{Name: "matrix-sync", Holder: id, TTL: base.LeaseTTL, Logger: log})
	if cstore != nil {
		m.cryptoJob = lease.NewSingle(st, lease.Options{Name: matrix.CryptoLease, Holder: id, TTL: base.LeaseTTL, Logger: log})
		if c.PasswordFile != "" {
			b, err := os.ReadFile(c.PasswordFile)
			if err != nil {
				return nil, fmt.Errorf("--matrix-password-file: %w", err)
			}
			m.password = strings.TrimRight(string(b), "\r\n")
		}
	}
	if reg != nil {
		addr := c.AppserviceAddr
		if addr == "" {
			u, err := url.Parse(reg.URL)
			if err != nil || u.Host == "" {
				return nil, errors.New("--matrix-registration: url is not an absolute URL; set --matrix-appservice-addr")
			}
			addr = u.Host
		}
		// Bound now, before anything runs: a relay deaf to the
		// homeserver's pushes must not start.
		if m.ln, err = listen("--matrix-appservice-addr", "ACRELAY_MATRIX_APPSERVICE_ADDR", addr); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Runner is the Matrix courier's runner, nil when the courier is off. run
// runs it; runServe reports its Status (lag, failing targets, last error)
// beside the other couriers' (readiness, metrics).
func (m *matrixServices) Runner() *couriers.Runner {
	if m == nil {
		return nil
	}
	return m.runner
}

// binderOrNil keeps a nil *matrixServices from becoming a non-nil interface.
func (m *matrixServices) binderOrNil() relay.MatrixBinder {
	if m == nil {
		return nil
	}
	return m.binder
}

// run runs the Matrix courier until ctx ends: its runner, the inbound
// side — the application-service listener (on every process: any may take
// a push) or the bot's /sync long-poll — and the inbox (each on the one
// process holding its relay-wide lease; with encryption, the runner, the
// inbox and the /sync under the lease over the relay's Matrix device,
// underCrypto). Errors: the application-service listener's.
func (m *matrixServices) run(ctx context.Context) error {
	p := newParts(ctx)
	switch {
	case m.cryptoJob != nil:
		p.alone(m.cryptoJob, m.underCrypto)
	case m.reg == nil:
		p.run("courier", m.runner.Run)
		p.alone(m.inboxJob, m.inbox.Run)
		p.alone(m.syncJob, m.inbox.Sync)
	default:
		p.run("courier", m.runner.Run)
		p.alone(m.inboxJob, m.inbox.Run)
	}
	if m.reg != nil {
		hs := relay.HTTPServer(m.ln.Addr().String(), relay.AppserviceHandler(m.reg.ServerToken, appserviceSink{m}, m.log))
		m.log.Info("matrix appservice listening", "addr", m.ln.Addr().String())
		p.run("appservice listener", func(ctx context.Context) error { return serveHTTP(ctx, hs, m.ln, 5*time.Second, m.log) })
		p.run("appservice ping", func(ctx context.Context) error { m.ping(ctx); return nil })
	}
	return p.wait()
}

// ping asks the homeserver to ping the application service
// (POST /_matrix/client/v1/appservice/{id}/ping), once the listener is
// up: a homeserver that backed off its pushes during an outage (Synapse:
// up to 512 s) retries them at once after a successful ping. It retries
// with backoff (1 s doubling to 1 min) until one succeeds or ctx ends.
func (m *matrixServices) ping(ctx context.Context) {
	for n := 1; ctx.Err() == nil; n++ {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := m.cli.AppservicePing(pctx, m.reg.ID, "acrelay-start-"+randomToken()[:16])
		cancel()
		if err == nil {
			m.log.Info("matrix appservice ping answered", "duration_ms", resp.DurationMS)
			return
		}
		if matrix.Unsupported(err) {
			m.log.Info("matrix appservice ping: the homeserver does not support it", "err", err)
			return
		}
		wait := backoff.Policy{Initial: time.Second, Max: time.Minute}.Ceiling(n)
		m.log.Warn("matrix appservice ping failed", "attempts", n, "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}
