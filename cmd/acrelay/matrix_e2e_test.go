package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/internal/dendritetest"
)

// roomRecords reads, as cli, the event ids of the record events the
// courier's user sent to room, oldest first.
func roomRecords(t *testing.T, cli *mautrix.Client, room id.RoomID, sender id.UserID) []string {
	t.Helper()
	out, err := readRoomRecords(cli, room, sender)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readRoomRecords is roomRecords returning the homeserver's error (a
// loaded Dendrite answers /messages 500 now and then).
func readRoomRecords(cli *mautrix.Client, room id.RoomID, sender id.UserID) ([]string, error) {
	var out []string
	from := ""
	for {
		resp, err := cli.Messages(context.Background(), room, from, "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			return nil, err
		}
		for _, ev := range resp.Chunk {
			if ev.Sender != sender || ev.Type.Type != matrix.EventTypeRecord {
				continue
			}
			var c struct {
				Event struct {
					EventID string `json:"event_id"`
				} `json:"event"`
			}
			if err := json.Unmarshal(ev.Content.VeryRaw, &c); err != nil {
				return nil, err
			}
			out = append(out, c.Event.EventID)
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// waitRoom waits until room holds exactly want, in order.
func waitRoom(t *testing.T, cli *mautrix.Client, room id.RoomID, sender id.UserID, want []string) {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for {
		got, err := readRoomRecords(cli, room, sender)
		if err == nil && strings.Join(got, ",") == strings.Join(want, ",") {
			return
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("room %s: %v", room, err)
			}
			t.Fatalf("room %s holds %d records, want exactly these %d once each, in order", room, len(got), len(want))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestServeMatrixDendrite runs the real binary against Dendrite in
// application-service mode: `acrelay matrix registration` → Dendrite's
// config → serve with --matrix-*; a binding made over HTTP (create,
// invite alice) and one with `acrelay matrix bind`; records posted over
// HTTP reach both rooms exactly once across a SIGKILL mid-stream; after
// DELETE of one binding nothing more reaches its room.
func TestServeMatrixDendrite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary against Dendrite; skipped with -short")
	}
	if err := dendritetest.Available(dendritetest.BinDir()); err != nil {
		t.Skipf("%v (run scripts/provision_dendrite.sh or set ACRELAY_DENDRITE_BIN)", err)
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
	hs := dendritetest.Start(t, dendritetest.Options{AppserviceYAML: string(reg)})
	alice := hs.CreateUser("alice")
	courierUser := hs.UserID("acrelay")
	data := filepath.Join(dir, "data")
	// The default lease (15 s): a restart on the same data dir reclaims it
	// at once, and a send may take up to 3/4 of it (a 2 s lease would cut
	// Dendrite's slower sends at 1.5 s).
	args := []string{"--data-dir", data, "--matrix-homeserver", hs.URL, "--matrix-registration", regPath}
	const op = "matrix-e2e-operator-token"
	r := startRelay(t, bin, args, "ACRELAY_OPERATOR_TOKEN="+op)
	p := registerProject(t, r.url, op)

	bindings := r.url + "/v1/admin/projects/" + p.id + "/matrix/bindings"
	status, m := httpJSON(t, "POST", bindings, p.token, map[string]any{"create": true, "invite": []string{alice.UserID.String()}})
	if status != 201 {
		t.Fatalf("POST bindings: %d %v", status, m)
	}
	roomA, bindingA := id.RoomID(m["room_id"].(string)), m["binding_id"].(string)
	if _, err := alice.JoinRoomByID(context.Background(), roomA); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		ids = append(ids, p.post(t, r.url, "before "+strconv.Itoa(i)))
	}
	waitRoom(t, alice, roomA, courierUser, ids)

	// acrelay matrix bind, locally on the same store, while serve runs.
	out, err := exec.Command(bin, "matrix", "bind", "--data-dir", data, "--project", p.id, "--create",
		"--invite", alice.UserID.String(), "--matrix-homeserver", hs.URL, "--matrix-registration", regPath, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("matrix bind: %v: %s", err, out)
	}
	var local struct {
		RoomID string `json:"room_id"`
	}
	if err := json.Unmarshal(out, &local); err != nil || local.RoomID == "" {
		t.Fatalf("matrix bind printed %s", out)
	}
	roomB := id.RoomID(local.RoomID)
	if _, err := alice.JoinRoomByID(context.Background(), roomB); err != nil {
		t.Fatal(err)
	}
	waitRoom(t, alice, roomB, courierUser, ids) // the running relay found it: every record from the start

	// SIGKILL mid-stream, restart on the same store: each record once.
	for i := range 20 {
		ids = append(ids, p.post(t, r.url, "stream "+strconv.Itoa(i)))
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r = startRelay(t, bin, args, "ACRELAY_OPERATOR_TOKEN="+op)
	for i := range 3 {
		ids = append(ids, p.post(t, r.url, "after restart "+strconv.Itoa(i)))
	}
	waitRoom(t, alice, roomA, courierUser, ids)
	waitRoom(t, alice, roomB, courierUser, ids)

	// DELETE one binding: later records reach only the other room.
	bindings = r.url + "/v1/admin/projects/" + p.id + "/matrix/bindings"
	if status, m := httpJSON(t, "DELETE", bindings+"/"+bindingA, p.token, nil); status != 204 {
		t.Fatalf("DELETE binding: %d %v", status, m)
	}
	before := len(ids)
	for i := range 3 {
		ids = append(ids, p.post(t, r.url, "after unbinding "+strconv.Itoa(i)))
	}
	waitRoom(t, alice, roomB, courierUser, ids)
	time.Sleep(time.Second)
	if got := roomRecords(t, alice, roomA, courierUser); len(got) != before {
		t.Fatalf("room of the removed binding holds %d records, want %d (nothing after DELETE)", len(got), before)
	}
}
