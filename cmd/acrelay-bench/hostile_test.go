package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// TestHostileBench: a small flood through the real binary, with small
// caps: the relay holds no more subscriptions than they allow, refuses
// the rest with the caps' codes, and stores every acknowledged event.
func TestHostileBench(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a relay process")
	}
	bin := benchBinary(t)
	cmd := exec.Command(bin, "hostile", "--requests", "400", "--flood-clients", "4", "--flood-addresses", "50",
		"--agents", "2", "--rate", "10", "--quiet", "500ms", "--max-flood", "60s",
		"--websub-max-subscriptions-per-topic", "30", "--websub-max-subscriptions-per-host", "20",
		"--websub-max-subscriptions-per-project", "50", "--websub-max-pending-per-host", "4", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("acrelay-bench hostile: %v\n%s\n%s", err, out, stderr.String())
	}
	var r hostileResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	refused := r.Answers["409 hub_host_subscriptions_limit"] + r.Answers["409 hub_host_verifications_limit"]
	if !r.CapHeld || r.Subscriptions > 20 || r.Answers["202"] > 20 || r.Answers["202"] == 0 || refused == 0 ||
		r.Answers["202"]+refused+r.Answers["429 rate_limited"] != 400 {
		t.Errorf("caps: %+v", r)
	}
	// Every refusal is counted in /metrics under its limit.
	for limit, answer := range map[string]string{"client_rate": "429 rate_limited",
		"websub_topic_subscriptions": "409 hub_topic_subscriptions_limit", "websub_host_subscriptions": "409 hub_host_subscriptions_limit",
		"websub_project_subscriptions": "409 hub_project_subscriptions_limit", "websub_host_verifications": "409 hub_host_verifications_limit"} {
		if r.Refusals[limit] != r.Answers[answer] {
			t.Errorf("acrelay_limit_refusals_total{limit=%q} = %d, answers %q = %d", limit, r.Refusals[limit], answer, r.Answers[answer])
		}
	}
	if r.Refusals["token_rate"] != 0 {
		t.Errorf("token_rate refusals %d: the agents post under their rate", r.Refusals["token_rate"])
	}
	if r.Lost != 0 || r.Acknowledged == 0 || r.Stored != r.Acknowledged || r.AppendErrors != 0 {
		t.Errorf("events: acknowledged %d, stored %d, lost %d, errors %d", r.Acknowledged, r.Stored, r.Lost, r.AppendErrors)
	}
}
