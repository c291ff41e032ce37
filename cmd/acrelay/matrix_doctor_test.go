package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/internal/dendritetest"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// doctor runs `acrelay matrix doctor --json` and returns its exit code
// and findings as "status check subject" lines, sorted.
func doctor(t *testing.T, bin string, env []string, args ...string) (int, []string, []matrix.Finding) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"matrix", "doctor", "--json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Findings []matrix.Finding `json:"findings"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("doctor printed %q (stderr %q): %v", out.String(), stderr.String(), err)
	}
	var lines []string
	for _, f := range res.Findings {
		lines = append(lines, f.Status+" "+f.Check+" "+f.Subject)
	}
	sort.Strings(lines)
	return code, lines, res.Findings
}

// TestMatrixDoctor runs `acrelay matrix doctor` (the real binary) against
// an unreachable homeserver, and against Dendrite with a registration it
// does not know, then with its own registration and four bound rooms: one
// the relay may post to, one it is not in, one whose power levels forbid
// it to post, and one whose last delivery the homeserver throttled.
func TestMatrixDoctor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	botEnv := []string{"ACRELAY_MATRIX_ACCESS_TOKEN=doctor-test-token"}

	code, lines, fs := doctor(t, bin, botEnv, "--data-dir", data, "--matrix-homeserver", "http://"+freeAddr(t), "--matrix-user-id", "@bot:acrelay.test")
	if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "fail homeserver http://127.0.0.1:") || !strings.HasPrefix(fs[0].Detail, "unreachable: ") {
		t.Fatalf("unreachable homeserver: exit %d, %q %+v", code, lines, fs)
	}

	if err := dendritetest.Available(dendritetest.BinDir()); err != nil {
		t.Skipf("%v (run scripts/provision_dendrite.sh or set ACRELAY_DENDRITE_BIN)", err)
	}
	dir := t.TempDir()
	regFile := func(name string) (string, string) {
		reg, err := exec.Command(bin, "matrix", "registration", "--url", "http://"+freeAddr(t), "--homeserver-name", "acrelay.test").Output()
		if err != nil {
			t.Fatalf("matrix registration: %v", err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, reg, 0o600); err != nil {
			t.Fatal(err)
		}
		return p, string(reg)
	}
	known, knownYAML := regFile("known.yaml")
	unknown, _ := regFile("unknown.yaml")
	hs := dendritetest.Start(t, dendritetest.Options{AppserviceYAML: knownYAML})

	code, lines, _ = doctor(t, bin, nil, "--data-dir", data, "--matrix-homeserver", hs.URL, "--matrix-registration", unknown)
	if want := []string{"fail credentials ", "ok homeserver " + hs.URL}; code != 1 || strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("unknown registration: exit %d, %q, want 1, %q", code, lines, want)
	}

	// Four rooms, bound in the store.
	ctx := context.Background()
	bot := hs.UserID("acrelay")
	asCli, err := matrix.NewClient(hs.URL, bot, strings.TrimSpace(yamlValue(t, knownYAML, "as_token")))
	if err != nil {
		t.Fatal(err)
	}
	alice := hs.CreateUser("alice")
	good, err := matrix.CreateRoom(ctx, asCli, "good", nil)
	if err != nil {
		t.Fatal(err)
	}
	outside, err := matrix.CreateRoom(ctx, alice, "without the bot", nil)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := matrix.CreateRoom(ctx, alice, "strict", []id.UserID{bot})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := asCli.JoinRoomByID(ctx, strict); err != nil {
		t.Fatal(err)
	}
	var pl event.PowerLevelsEventContent
	if err := alice.StateEvent(ctx, strict, event.StatePowerLevels, "", &pl); err != nil {
		t.Fatal(err)
	}
	pl.EventsDefault = 50
	if _, err := alice.SendStateEvent(ctx, strict, event.StatePowerLevels, "", &pl); err != nil {
		t.Fatal(err)
	}
	throttled, err := matrix.CreateRoom(ctx, asCli, "throttled", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(ctx, storeConfig{DataDir: data, SQLiteSync: "fdatasync", SQLiteMaxBatch: 128, Create: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	var bindings []store.MatrixBinding
	for _, r := range []id.RoomID{good, outside, strict, throttled} {
		b, err := st.CreateMatrixBinding(ctx, store.MatrixBinding{ID: storetest.NewUUID(), ProjectID: p.ID, RoomID: r.String()})
		if err != nil {
			t.Fatal(err)
		}
		bindings = append(bindings, b)
	}
	leases, err := st.AcquireLeases(ctx, matrix.Name, "doctor-test", []string{p.ID}, time.Minute)
	if err != nil || len(leases) != 1 {
		t.Fatalf("lease: %v %v", leases, err)
	}
	for i, msg := range map[int]string{
		0: "send record sha256:aa: M_UNKNOWN (HTTP 502): bad gateway",
		3: "retry after 7s: send record sha256:aa: M_LIMIT_EXCEEDED (HTTP 429): Too Many Requests",
	} {
		if _, err := st.RecordFailure(ctx, leases[0], bindings[i].ID, time.Second, msg); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	code, lines, fs = doctor(t, bin, nil, "--data-dir", data, "--matrix-homeserver", hs.URL, "--matrix-registration", known)
	want := []string{
		"fail room " + outside.String(),
		"fail room " + strict.String(),
		"fail throttle " + throttled.String(),
		"ok credentials " + bot.String(),
		"ok homeserver " + hs.URL,
		"ok room " + good.String(),
		"ok room " + throttled.String(),
		"ok throttle " + good.String(),
		"warn appservice_ping " + yamlValue(t, knownYAML, "id"),
	}
	sort.Strings(want)
	if code != 1 || strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("exit %d, findings\n%s\nwant 1 and\n%s", code, strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for _, f := range fs {
		if f.Check == matrix.CheckPing {
			t.Logf("ping with no relay running: %s", f.Detail)
		}
		switch {
		case f.Check == matrix.CheckRoom && f.Subject == strict.String() && f.Detail != "the relay's user has power level 0, the room requires 50 to send "+matrix.EventTypeRecord+": raise its level":
			t.Errorf("strict room: %q", f.Detail)
		case f.Check == matrix.CheckThrottle && f.Status == matrix.StatusFail && !strings.Contains(f.Detail, "/_synapse/admin/v1/users/"+bot.String()+"/override_ratelimit"):
			t.Errorf("throttle advice: %q", f.Detail)
		}
	}
}

// yamlValue reads a top-level "key: value" line of a registration.
func yamlValue(t *testing.T, y, key string) string {
	t.Helper()
	for _, line := range strings.Split(y, "\n") {
		if v, ok := strings.CutPrefix(line, key+": "); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	t.Fatalf("no %s in the registration", key)
	return ""
}

// TestMatrixDoctorSetupErrors: inputs the doctor refuses before asking a
// homeserver anything, each with a message naming what to give (found by
// a hostile newcomer: "not both" when neither was given, a homeserver
// "not a url" silently turned into https://not%20a%20url).
func TestMatrixDoctorSetupErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	hs := "http://" + freeAddr(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"neither mode", []string{"--matrix-homeserver", hs},
			"acrelay: give --matrix-registration (application service) or --matrix-user-id with an access token (bot)\n"},
		{"both modes", []string{"--matrix-homeserver", hs, "--matrix-registration", "reg.yaml", "--matrix-user-id", "@bot:acrelay.test"},
			"acrelay: give --matrix-registration (application service) or --matrix-user-id with an access token (bot), not both\n"},
		{"bot without a token", []string{"--matrix-homeserver", hs, "--matrix-user-id", "@bot:acrelay.test"},
			"acrelay: --matrix-user-id needs the bot's access token (--matrix-access-token, ACRELAY_MATRIX_ACCESS_TOKEN or ACRELAY_MATRIX_ACCESS_TOKEN_FILE)\n"},
		{"homeserver not a URL", []string{"--matrix-homeserver", "not a url", "--matrix-user-id", "@bot:acrelay.test"},
			"acrelay: --matrix-homeserver must be an http:// or https:// URL (the homeserver's client-server API base)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"matrix", "doctor", "--data-dir", data}, tc.args...)...)
			cmd.Env = os.Environ()
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = io.Discard, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1; stderr %q", err, stderr.String())
			}
			if !strings.HasSuffix(stderr.String(), tc.want) {
				t.Errorf("stderr %q, want it to end %q", stderr.String(), tc.want)
			}
		})
	}
}
