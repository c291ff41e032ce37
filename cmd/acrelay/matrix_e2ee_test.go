//go:build goolm

package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/internal/dendritetest"
	"github.com/acrelay/acrelay/internal/hstest"
	"github.com/acrelay/acrelay/internal/matrixtest"
	"github.com/acrelay/acrelay/internal/synapsetest"
)

// encryptedRoomFor: alice creates a private room the way Element does
// (m.room.encryption megolm in its initial state) and invites bot; the
// relay's /sync joins it; alice's client sees the join.
func encryptedRoomFor(t *testing.T, alice *matrixtest.Member, bot id.UserID) id.RoomID {
	t.Helper()
	resp, err := alice.Cli.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "encrypted project room",
		Invite:       []id.UserID{bot},
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(40 * time.Second)
	for !alice.Cli.StateStore.IsInRoom(context.Background(), resp.RoomID, bot) {
		if time.Now().After(deadline) {
			t.Fatal("the relay's bot never joined the room it was invited to")
		}
		time.Sleep(200 * time.Millisecond)
	}
	return resp.RoomID
}

// pub is the Ed25519 public key of p's signing key.
func (p *testProject) pub() []byte { return p.priv.Public().(ed25519.PublicKey) }

// botRelay is what the relay needs in bot mode: its flags and environment.
func botRelay(hs *dendritetest.Server, bot *mautrix.Client, op string) ([]string, []string) {
	return []string{"--matrix-homeserver", hs.URL, "--matrix-user-id", bot.UserID.String()},
		[]string{"ACRELAY_MATRIX_ACCESS_TOKEN=" + bot.AccessToken, "ACRELAY_OPERATOR_TOKEN=" + op}
}

// submitEncrypted sends a signed event of p as alice's encrypted
// submission and waits for exactly one encrypted reply accepting it; it
// returns the appended event id.
func submitEncrypted(t *testing.T, alice *matrixtest.Member, room id.RoomID, bot id.UserID, p *testProject, raw json.RawMessage) string {
	t.Helper()
	sub, err := alice.Send(room, event.Type{Type: matrix.EventTypeSubmit, Class: event.MessageEventType}, json.RawMessage(`{"event":`+string(raw)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := alice.Read(t, room, bot, p.pub())
		if len(s.Replies[sub.EventID]) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no reply to the encrypted submission")
		}
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(time.Second) // a second reply would come right after the first
	got := alice.Read(t, room, bot, p.pub()).Replies[sub.EventID]
	if len(got) != 1 || !got[0].OK || got[0].EventID == "" {
		t.Fatalf("replies to the encrypted submission: %+v, want exactly one accepting it", got)
	}
	return got[0].EventID
}

// TestServeEncryptedRoomBotSQLite runs the real binary (built with -tags
// goolm) in bot mode against Dendrite: a member's Element-style encrypted
// room is bound over HTTP (201 says "encrypted": true); records posted
// over HTTP reach the member as m.room.encrypted that decrypts to the
// record event and the notice, in order, exactly once, across a SIGKILL
// mid-stream and a restart on the same store; zero plaintext events from
// the relay; an encrypted submission is appended and answered once;
// /metrics carries the undecryptable counter.
func TestServeEncryptedRoomBotSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary against Dendrite; skipped with -short")
	}
	if err := dendritetest.Available(dendritetest.BinDir()); err != nil {
		t.Skipf("%v (run scripts/provision_dendrite.sh or set ACRELAY_DENDRITE_BIN)", err)
	}
	bin := acrelayBinary(t)
	hs := dendritetest.Start(t, dendritetest.Options{})
	bot := hs.CreateUser("relaybot")
	alice := matrixtest.NewMember(t, hs, "alice")
	const op = "matrix-e2ee-operator-token"
	margs, env := botRelay(hs, bot, op)
	pw := filepath.Join(t.TempDir(), "bot-password")
	if err := os.WriteFile(pw, []byte("password-relaybot\n"), 0o600); err != nil { // dendritetest's password
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	args := append([]string{"--data-dir", data, "--matrix-password-file", pw}, margs...)
	r := startRelay(t, bin, args, env...)
	p := registerProject(t, r.url, op)
	room := encryptedRoomFor(t, alice, bot.UserID)
	status, m := httpJSON(t, "POST", r.url+"/v1/admin/projects/"+p.id+"/matrix/bindings", p.token, map[string]any{"room_id": room.String()})
	if status != 201 || m["encrypted"] != true {
		t.Fatalf("POST bindings: %d %v, want 201 with encrypted true", status, m)
	}
	// The POST answer carries the relay's part in the room (cross-signing
	// may still be under way: it runs in the background).
	e, _ := m["e2ee"].(map[string]any)
	if e["available"] != true || e["device_id"] != bot.DeviceID.String() || e["device_keys"] != true || e["lease_held"] != true || e["takes_part"] != true ||
		e["detail"] != map[bool]string{true: matrix.DetailTakesPart, false: matrix.DetailNotCrossSigned}[e["cross_signed"] == true] {
		t.Fatalf("POST bindings e2ee: %v", m["e2ee"])
	}
	bindingID, createdAt := m["binding_id"].(string), m["created_at"].(string)
	var ids []string
	for i := range 3 {
		ids = append(ids, p.post(t, r.url, "before "+strconv.Itoa(i)))
	}
	alice.WaitRoom(t, room, bot.UserID, p.pub(), ids)

	for i := range 15 {
		ids = append(ids, p.post(t, r.url, "stream "+strconv.Itoa(i)))
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	_ = r.cmd.Wait()
	r = startRelay(t, bin, args, env...)
	for i := range 3 {
		ids = append(ids, p.post(t, r.url, "after restart "+strconv.Itoa(i)))
	}
	alice.WaitRoom(t, room, bot.UserID, p.pub(), ids)

	_, raw := p.signed(t, "submitted encrypted")
	ids = append(ids, submitEncrypted(t, alice, room, bot.UserID, p, raw))
	alice.WaitRoom(t, room, bot.UserID, p.pub(), ids)

	// The doctor, beside the running relay: the room is encrypted and the
	// relay takes part; its device is published and cross-signed (with
	// --matrix-password-file, in the background after the start).
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := exec.Command(bin, "matrix", "doctor", "--data-dir", data, "--matrix-homeserver", hs.URL, "--matrix-user-id", bot.UserID.String(),
			"--matrix-access-token", bot.AccessToken).CombinedOutput()
		if strings.Contains(string(out), "ok    room_encryption  "+room.String()+"  end-to-end encrypted: the relay encrypts") &&
			strings.Contains(string(out), "device keys published and cross-signed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("matrix doctor:\n%s", out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	status, _, body := httpRaw(t, "GET", r.url+"/metrics", op)
	if status != 200 || !strings.Contains(body, `acrelay_matrix_undecryptable_total{reason="no_session"} 0`) ||
		!strings.Contains(body, `acrelay_matrix_to_device_refused_total{reason="olm_not_for_this_device"} 0`) {
		t.Errorf("/metrics: %d, no Matrix encryption counters", status)
	}

	// GET of the bindings and `acrelay matrix bindings` say, per room,
	// that it is encrypted and the relay's part in it, in the POST
	// answer's shape: the running relay holds the device's lease, the
	// device is published and cross-signed.
	binding := func(leaseHeld bool, detail string) string {
		return `{"binding_id":"` + bindingID + `","project_id":"` + p.id + `","room_id":"` + room.String() + `","created_at":"` + createdAt +
			`","encrypted":true,"e2ee":{"available":true,"device_id":"` + bot.DeviceID.String() + `","device_keys":true,"lease_held":` +
			strconv.FormatBool(leaseHeld) + `,"cross_signed":true,"takes_part":` + strconv.FormatBool(leaseHeld) + `,"detail":"` + detail + `"}}`
	}
	status, _, body = httpRaw(t, "GET", r.url+"/v1/admin/projects/"+p.id+"/matrix/bindings", p.token)
	if want := `{"bindings":[` + binding(true, matrix.DetailTakesPart) + `]}`; status != 200 || strings.TrimSpace(body) != want {
		t.Errorf("GET bindings: %d\n%s\nwant\n%s", status, body, want)
	}
	cli := []string{"matrix", "bindings", "--data-dir", data, "--project", p.id, "--matrix-homeserver", hs.URL,
		"--matrix-user-id", bot.UserID.String(), "--matrix-access-token", bot.AccessToken}
	out, err := exec.Command(bin, append(cli, "--json")...).CombinedOutput()
	if want := "[" + binding(true, matrix.DetailTakesPart) + "]\n"; err != nil || string(out) != want {
		t.Errorf("matrix bindings --json: %v\n%s\nwant\n%s", err, out, want)
	}
	out, err = exec.Command(bin, cli...).CombinedOutput()
	if want := bindingID + " " + room.String() + " (end-to-end encrypted: " + matrix.DetailTakesPart + ")\n"; err != nil || string(out) != want {
		t.Errorf("matrix bindings: %v\n%q\nwant\n%q", err, out, want)
	}
	// Without the homeserver's flags: the bindings as stored.
	out, err = exec.Command(bin, "matrix", "bindings", "--data-dir", data, "--project", p.id, "--json").CombinedOutput()
	if want := `[{"binding_id":"` + bindingID + `","project_id":"` + p.id + `","room_id":"` + room.String() + `","created_at":"` + createdAt + "\"}]\n"; err != nil || string(out) != want {
		t.Errorf("matrix bindings --json without --matrix-*: %v\n%s\nwant\n%s", err, out, want)
	}
	// The relay stopped (its lease released): no process drives the
	// device, the relay does not take part.
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Wait()
	out, err = exec.Command(bin, append(cli, "--json")...).CombinedOutput()
	if want := "[" + binding(false, matrix.DetailLeaseFree) + "]\n"; err != nil || string(out) != want {
		t.Errorf("matrix bindings --json, relay stopped: %v\n%s\nwant\n%s", err, out, want)
	}
}

// TestServeEncryptedRoomTwoProcesses: two serve processes on one
// PostgreSQL, bot mode with encryption; one drives the Matrix device
// (lease matrix-crypto) and is SIGKILLed; the other takes the device over
// from the store: every record, before and after, reaches the member
// decryptable exactly once, and a submission after the kill is answered
// once.
func TestServeEncryptedRoomTwoProcesses(t *testing.T) {
	pg := postgresArgs(t)
	if err := dendritetest.Available(dendritetest.BinDir()); err != nil {
		t.Skipf("%v (run scripts/provision_dendrite.sh or set ACRELAY_DENDRITE_BIN)", err)
	}
	bin := acrelayBinary(t)
	hs := dendritetest.Start(t, dendritetest.Options{})
	bot := hs.CreateUser("relaybot")
	alice := matrixtest.NewMember(t, hs, "alice")
	const op = "matrix-e2ee-two-operator-token"
	margs, env := botRelay(hs, bot, op)
	args := append(append(append([]string{}, pg...), margs...), "--courier-lease", "3s")
	a := startRelay(t, bin, args, env...)
	p := registerProject(t, a.url, op)
	room := encryptedRoomFor(t, alice, bot.UserID) // A's /sync joins: A drives the device
	if status, m := httpJSON(t, "POST", a.url+"/v1/admin/projects/"+p.id+"/matrix/bindings", p.token, map[string]any{"room_id": room.String()}); status != 201 {
		t.Fatalf("POST bindings: %d %v", status, m)
	}
	var ids []string
	for i := range 3 {
		ids = append(ids, p.post(t, a.url, "A alone "+strconv.Itoa(i)))
	}
	alice.WaitRoom(t, room, bot.UserID, p.pub(), ids)

	b := startRelay(t, bin, args, env...)
	for i := range 5 {
		ids = append(ids, p.post(t, b.url, "both up "+strconv.Itoa(i)))
	}
	alice.WaitRoom(t, room, bot.UserID, p.pub(), ids)

	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	_ = a.cmd.Wait()
	killed := time.Now()
	for i := range 5 {
		ids = append(ids, p.post(t, b.url, "after the kill "+strconv.Itoa(i)))
	}
	alice.WaitRoom(t, room, bot.UserID, p.pub(), ids)
	t.Logf("the successor delivered everything, decryptable, %v after SIGKILL of the device's holder (lease 3s)", time.Since(killed).Round(10*time.Millisecond))
	_, raw := p.signed(t, "submitted after the kill")
	ids = append(ids, submitEncrypted(t, alice, room, bot.UserID, p, raw))
	alice.WaitRoom(t, room, bot.UserID, p.pub(), ids)
}

// signed returns a new event of p, signed, as its canonical JSON (what
// trySend posts).
func (p *testProject) signed(t *testing.T, summary string) (string, json.RawMessage) {
	t.Helper()
	p.seq++
	ev := &correspondence.Event{ProjectID: p.id, RepositoryID: "repo:mp", ThreadID: "t",
		Sender: correspondence.Sender{IdentityID: p.identity, SigningKeyID: p.key, DeviceID: p.session, SessionID: p.session},
		Kind:   correspondence.KindProgress, Parents: []string{}, SessionSeq: p.seq,
		IssuedAt: correspondence.FormatTimestamp(time.Now()), Scope: correspondence.Scope{Paths: []string{"."}},
		Body: canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue(summary)})}
	if err := ev.Sign(p.priv); err != nil {
		t.Fatal(err)
	}
	b, err := ev.CanonicalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return ev.ID, b
}

// httpRaw is a request with a bearer token; it returns the status,
// headers and body.
func httpRaw(t *testing.T, method, url, token string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// TestServeEncryptedRoomAppservice: the real binary in application-service
// mode with encryption: the relay's device comes from
// m.login.application_service; a member's Element-style encrypted room,
// bound while the relay is only invited (the courier joins on its first
// delivery), gets every record encrypted and decryptable exactly once
// across a SIGKILL and restart, and an encrypted submission pushed by
// the homeserver is appended and answered once, encrypted.
func TestServeEncryptedRoomAppservice(t *testing.T) {
	if err := dendritetest.Available(dendritetest.BinDir()); err != nil {
		t.Skipf("%v (run scripts/provision_dendrite.sh or set ACRELAY_DENDRITE_BIN)", err)
	}
	testServeEncryptedRoomAppservice(t, func(t testing.TB, opt hstest.Options) hstest.Homeserver { return dendritetest.Start(t, opt) }, false)
}

// TestServeEncryptedRoomAppserviceSynapse: the same on Synapse, which
// refuses /sync to the application service's sender: the relay's device
// gets its room keys from the to-device events Synapse pushes in the
// transactions (MSC2409/MSC3202, asked for by `acrelay matrix
// registration`), through the binary's application-service listener.
func TestServeEncryptedRoomAppserviceSynapse(t *testing.T) {
	if err := synapsetest.Available(synapsetest.Root()); err != nil {
		t.Skipf("%v (scripts/test.sh provisions it: scripts/provision_synapse.sh, ACRELAY_SYNAPSE_ROOT)", err)
	}
	testServeEncryptedRoomAppservice(t, func(t testing.TB, opt hstest.Options) hstest.Homeserver { return synapsetest.Start(t, opt) }, true)
}

// testServeEncryptedRoomAppservice is TestServeEncryptedRoomAppservice on
// the homeserver startHS starts; crossSigns: the homeserver takes the
// application service's first cross-signing keys without a password
// (Synapse), so the bindings report and the doctor come to show the
// device cross-signed; otherwise (Dendrite) they say it is not, and why.
func testServeEncryptedRoomAppservice(t *testing.T, startHS hstest.Start, crossSigns bool) {
	if testing.Short() {
		t.Skip("builds and runs the binary against a homeserver; skipped with -short")
	}
	bin := acrelayBinary(t)
	dir := t.TempDir()
	asAddr := freeAddr(t)
	reg, err := exec.Command(bin, "matrix", "registration", "--url", "http://"+asAddr, "--homeserver-name", "acrelay.test").Output()
	if err != nil {
		t.Fatalf("matrix registration: %v", err)
	}
	regPath := filepath.Join(dir, "acrelay-registration.yaml")
	if err := os.WriteFile(regPath, reg, 0o600); err != nil {
		t.Fatal(err)
	}
	hs := startHS(t, hstest.Options{AppserviceYAML: string(reg)})
	alice := matrixtest.NewMember(t, hs, "alice")
	asUser := hs.UserID("acrelay")
	const op = "matrix-e2ee-as-operator-token"
	args := []string{"--data-dir", filepath.Join(dir, "data"), "--matrix-homeserver", hs.HomeserverURL(), "--matrix-registration", regPath}
	r := startRelay(t, bin, args, "ACRELAY_OPERATOR_TOKEN="+op)
	p := registerProject(t, r.url, op)
	resp, err := alice.Cli.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "encrypted, appservice",
		Invite:       []id.UserID{asUser},
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	room := resp.RoomID
	// The relay's user may still be only invited (the room's state not
	// readable yet: the answer says so) or already joined through the
	// homeserver's push (the room is encrypted).
	status, m := httpJSON(t, "POST", r.url+"/v1/admin/projects/"+p.id+"/matrix/bindings", p.token, map[string]any{"room_id": room.String()})
	e, _ := m["e2ee"].(map[string]any)
	if detail, _ := e["detail"].(string); status != 201 || e["available"] != true ||
		!(m["encrypted"] == nil && strings.HasPrefix(detail, matrix.DetailRoomUnknown+"; ") || m["encrypted"] == true && e["device_keys"] == true) {
		t.Fatalf("POST bindings: %d %v, want 201 saying the room is encrypted or that it is not known yet", status, m)
	}
	bindingID, createdAt := m["binding_id"].(string), m["created_at"].(string)
	var ids []string
	for i := range 3 {
		ids = append(ids, p.post(t, r.url, "appservice "+strconv.Itoa(i)))
	}
	alice.WaitRoom(t, room, asUser, p.pub(), ids)
	// Joined and delivering: the room is encrypted and the relay takes
	// part with the application service's own device. It is cross-signed
	// (in the background) where the homeserver takes the first
	// cross-signing keys without a password; elsewhere it stays not
	// cross-signed and the detail says why.
	var body string
	var got struct {
		Bindings []matrix.BindingJSON `json:"bindings"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		status, _, body = httpRaw(t, "GET", r.url+"/v1/admin/projects/"+p.id+"/matrix/bindings", p.token)
		if err := json.Unmarshal([]byte(body), &got); status != 200 || err != nil || len(got.Bindings) != 1 || got.Bindings[0].E2EE == nil || got.Bindings[0].E2EE.DeviceID == "" {
			t.Fatalf("GET bindings: %d %s", status, body)
		}
		if got.Bindings[0].E2EE.CrossSigned == crossSigns || time.Now().After(deadline) {
			break
		}
	}
	xs := `"cross_signed":false,"takes_part":true,"detail":"` + matrix.DetailNotCrossSignedAppservice + `"}}]}`
	doctorDevice := "warn  e2ee_device      " + asUser.String() + " " + got.Bindings[0].E2EE.DeviceID + "  device keys published; the device is not cross-signed: clients that exclude unverified devices (Element's MSC4153 setting) send it no room keys; an application service has no password, so the relay cross-signs its device only where the homeserver takes the user's first cross-signing keys without one"
	if crossSigns {
		xs = `"cross_signed":true,"takes_part":true,"detail":"` + matrix.DetailTakesPart + `"}}]}`
		doctorDevice = "ok    e2ee_device      " + asUser.String() + " " + got.Bindings[0].E2EE.DeviceID + "  device keys published and cross-signed by the relay's user"
	}
	want := `{"bindings":[{"binding_id":"` + bindingID + `","project_id":"` + p.id + `","room_id":"` + room.String() + `","created_at":"` + createdAt +
		`","encrypted":true,"e2ee":{"available":true,"device_id":"` + got.Bindings[0].E2EE.DeviceID + `","device_keys":true,"lease_held":true,` + xs
	if strings.TrimSpace(body) != want {
		t.Errorf("GET bindings:\n%s\nwant\n%s", body, want)
	}
	// The doctor beside the running relay reads the application service's
	// device from the store and says the same.
	out, _ := exec.Command(bin, "matrix", "doctor", "--data-dir", filepath.Join(dir, "data"), "--matrix-homeserver", hs.HomeserverURL(), "--matrix-registration", regPath).CombinedOutput()
	if !strings.Contains(string(out), doctorDevice) {
		t.Errorf("matrix doctor: no line %q in\n%s", doctorDevice, out)
	}
	for i := range 10 {
		ids = append(ids, p.post(t, r.url, "stream "+strconv.Itoa(i)))
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	_ = r.cmd.Wait()
	r = startRelay(t, bin, args, "ACRELAY_OPERATOR_TOKEN="+op)
	for i := range 2 {
		ids = append(ids, p.post(t, r.url, "after restart "+strconv.Itoa(i)))
	}
	alice.WaitRoom(t, room, asUser, p.pub(), ids)
	deadline := time.Now().Add(30 * time.Second)
	for !alice.Cli.StateStore.IsInRoom(context.Background(), room, asUser) {
		if time.Now().After(deadline) {
			t.Fatal("alice's client never saw the relay join")
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, raw := p.signed(t, "submitted encrypted to the appservice")
	ids = append(ids, submitEncrypted(t, alice, room, asUser, p, raw))
	alice.WaitRoom(t, room, asUser, p.pub(), ids)
}
