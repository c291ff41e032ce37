package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/couriers/matrix/e2ee"
	"github.com/acrelay/acrelay/store"
)

// newMatrixDoctorCmd is `acrelay matrix doctor`: what stands between the
// relay and its rooms, checked against the homeserver and the store.
func newMatrixDoctorCmd() *cobra.Command {
	var l localCmd
	var mc matrixConfig
	var rooms []string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the Matrix courier: homeserver reachable, registration or bot token accepted, rooms postable, bot not throttled",
		Long: "Checks, in order: the homeserver answers; it accepts the application service's as_token (the registration is\n" +
			"installed) or the bot's access token; in application-service mode, that it can ping the relay's listener;\n" +
			"for every bound room in the store (and every --room), that the relay's user is joined and may post, and\n" +
			"whether the room is end-to-end encrypted and the relay can take part (a build with -tags goolm, bot mode);\n" +
			"in bot mode with encryption, that the relay's device has published its keys and is cross-signed; and\n" +
			"that the courier's last delivery to each bound room was not refused with a 429 (a throttled bot).\n" +
			"Prints one line per check (status, check, subject, detail); exits 1 when any check fails.",
		Example: "  acrelay matrix doctor --data-dir ./data --matrix-homeserver http://127.0.0.1:8008 --matrix-registration acrelay-registration.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			fs, err := matrixDoctor(ctx, l, mc, rooms)
			if err != nil {
				return err
			}
			if err := printFindings(cmd.OutOrStdout(), l.json, fs); err != nil {
				return err
			}
			failed := 0
			for _, f := range fs {
				if f.Status == matrix.StatusFail {
					failed++
				}
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("matrix doctor: %d of %d checks failed", failed, len(fs))}
			}
			return nil
		},
	}
	l.flags(c)
	addMatrixFlags(c.Flags(), &mc)
	c.Flags().StringArrayVar(&rooms, "room", nil, "also check this room id (repeatable)")
	return c
}

// matrixDoctor runs the checks; an error is a setup fault (no homeserver
// given, an unreadable registration, a store that does not open).
func matrixDoctor(ctx context.Context, l localCmd, mc matrixConfig, extraRooms []string) ([]matrix.Finding, error) {
	if mc.Homeserver == "" {
		return nil, errors.New("--matrix-homeserver is required")
	}
	if u, err := url.Parse(mc.Homeserver); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("--matrix-homeserver must be an http:// or https:// URL (the homeserver's client-server API base)")
	}
	if mc.AccessToken == "" {
		tok, err := secretFromEnv("ACRELAY_MATRIX_ACCESS_TOKEN")
		if err != nil {
			return nil, err
		}
		mc.AccessToken = tok
	}
	var reg *appservice.Registration
	var cli *mautrix.Client
	var err error
	switch {
	case mc.Registration != "" && mc.UserID == "":
		if reg, err = appservice.LoadRegistration(mc.Registration); err != nil {
			return nil, fmt.Errorf("--matrix-registration: %w", err)
		}
		cli, err = matrix.NewClient(mc.Homeserver, "", reg.AppToken)
	case mc.Registration == "" && mc.UserID != "" && mc.AccessToken != "":
		cli, err = matrix.NewClient(mc.Homeserver, id.UserID(mc.UserID), mc.AccessToken)
	case mc.Registration != "" && mc.UserID != "":
		return nil, errors.New("give --matrix-registration (application service) or --matrix-user-id with an access token (bot), not both")
	case mc.UserID != "":
		return nil, errors.New("--matrix-user-id needs the bot's access token (--matrix-access-token, ACRELAY_MATRIX_ACCESS_TOKEN or ACRELAY_MATRIX_ACCESS_TOKEN_FILE)")
	default:
		return nil, errors.New("give --matrix-registration (application service) or --matrix-user-id with an access token (bot)")
	}
	if err != nil {
		return nil, err
	}
	cli.Client.Timeout = 15 * time.Second
	var fs []matrix.Finding
	add := func(f matrix.Finding) bool { fs = append(fs, f); return f.Status != matrix.StatusFail }
	if !add(matrix.CheckHomeserverReachable(ctx, cli)) || !add(matrix.CheckCredentialsAccepted(ctx, cli, reg != nil)) {
		return fs, nil // nothing further can be asked
	}
	if reg != nil {
		add(matrix.CheckAppservicePing(ctx, cli, reg.ID))
	}
	st, err := openStore(ctx, l.store, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	bindings, err := matrix.BoundRooms(ctx, st)
	if err != nil {
		return nil, err
	}
	// The relay takes part in encrypted rooms when built with -tags goolm
	// (its device is the bot's access token's, or in application-service
	// mode the one serve made and stored).
	// Encryption findings are added for encrypted rooms only: the report
	// of unencrypted rooms is as it always was.
	canEncrypt := e2ee.Built
	encrypted := false
	addEnc := func(room string) {
		if f := matrix.CheckRoomEncryption(ctx, cli, id.RoomID(room), canEncrypt); f.Detail != matrix.DetailUnencrypted && f.Detail != matrix.DetailEncryptionUnknown {
			add(f)
			encrypted = true
		}
	}
	seen := map[string]bool{}
	for _, b := range bindings {
		if !seen[b.RoomID] {
			seen[b.RoomID] = true
			add(matrix.CheckRoomPostable(ctx, cli, id.RoomID(b.RoomID)))
			addEnc(b.RoomID)
		}
		states, err := st.TargetStates(ctx, matrix.Name, b.ProjectID)
		if err != nil {
			return nil, err
		}
		for _, ts := range states {
			if ts.Target == b.ID {
				add(matrix.CheckThrottled(b, ts, cli.UserID))
			}
		}
	}
	for _, r := range extraRooms {
		if err := matrix.ValidateRoomID(r); err != nil {
			return nil, fmt.Errorf("--room %q: %w", r, err)
		}
		if !seen[r] {
			seen[r] = true
			add(matrix.CheckRoomPostable(ctx, cli, id.RoomID(r)))
			addEnc(r)
		}
	}
	if encrypted && canEncrypt && reg == nil {
		add(matrix.CheckDeviceKeys(ctx, cli))
	}
	if cs, ok := st.(store.MatrixCrypto); ok && encrypted && canEncrypt && reg != nil {
		// The application service's own device, as serve made and stored it.
		if user, dev, err := e2ee.RelayDevice(ctx, cli, true, cs); err != nil {
			add(matrix.Finding{Check: matrix.CheckDevice, Subject: cli.UserID.String(), Status: matrix.StatusWarn, Detail: "cannot read the application service's device from the store"})
		} else {
			add(matrix.CheckAppserviceDeviceKeys(ctx, cli, user, dev))
		}
	}
	if len(seen) == 0 {
		add(matrix.Finding{Check: matrix.CheckRoom, Status: matrix.StatusWarn, Detail: "no bound rooms in the store and no --room: nothing to post to yet"})
	}
	return fs, nil
}

func printFindings(w io.Writer, asJSON bool, fs []matrix.Finding) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(map[string]any{"findings": fs})
	}
	var b strings.Builder
	for _, f := range fs {
		subject := f.Subject
		if subject == "" {
			subject = "-"
		} else if u, err := url.Parse(subject); err == nil && u.User != nil {
			subject = u.Redacted()
		}
		fmt.Fprintf(&b, "%-4s  %-15s  %s  %s\n", f.Status, f.Check, subject, f.Detail)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
