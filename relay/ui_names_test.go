package relay_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
)

// newNamedAgent is newAgent with a display name of the test's choosing.
func (e *env) newNamedAgent(projectID, tok, name string) *agent {
	e.t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	body, _ := json.Marshal(map[string]string{"display_name": name})
	r := e.do("POST", "/v1/admin/projects/"+projectID+"/identities", tok, body)
	mustStatus(e.t, r, 201)
	ident := r.json(e.t)["identity_id"].(string)
	r = e.do("POST", "/v1/admin/identities/"+ident+"/keys", tok, []byte(`{"public_key_b64url":"`+correspondence.EncodePublicKey(pub)+`"}`))
	mustStatus(e.t, r, 201)
	return &agent{ProjectID: projectID, IdentityID: ident, KeyID: r.json(e.t)["signing_key_id"].(string),
		DeviceID: newUUID(), SessionID: newUUID(), Priv: priv, Token: tok}
}

var conflictItem = regexp.MustCompile(`(?s)<li class="conflict overlap">(.*?)</li>`)

// TestUIConflictsNamed: the web view names an overlap by each claim's
// owner (display name) and claim id; the event ids are only in tooltips.
// A hostile display name is text.
func TestUIConflictsNamed(t *testing.T) {
	e := newUIEnv(t, "")
	pid, tok := e.newProject("")
	ada := e.newNamedAgent(pid, tok, "Ada Lovelace")
	brook := e.newNamedAgent(pid, tok, `Brook <img src=x onerror=alert(1)>`)
	const repo = "repo-names"
	adaClaim, brookClaim := newUUID(), newUUID()
	openA := ada.claim(repo, "lexer", adaClaim, 1, "", time.Now().Add(time.Hour), "src/lexer")
	openB := brook.claim(repo, "lexer", brookClaim, 1, "", time.Now().Add(time.Hour), "src/lexer/tokens")
	mustStatus(t, e.post(ada, openA), 201)
	mustStatus(t, e.post(brook, openB), 201)
	sess := e.signIn(e.newToken(pid, "read"), repo)

	r := e.ui("GET", "/ui/projects/"+pid+"?repository_id="+repo, nil, []*http.Cookie{sess})
	mustStatus(t, r, 200)
	m := conflictItem.FindSubmatch(r.Body)
	if m == nil {
		t.Fatalf("no overlap in the conflicts section:\n%s", r.Body)
	}
	item := string(m[1])
	for _, want := range []string{
		`<span class="who">Ada Lovelace (` + ada.IdentityID[:8] + `)</span>'s claim <code title="` + openA.ID + `">` + adaClaim + `</code>`,
		`<span class="who">Brook &lt;img src=x onerror=alert(1)&gt; (` + brook.IdentityID[:8] + `)</span>'s claim <code title="` + openB.ID + `">` + brookClaim + `</code>`,
		`on <code>src/lexer</code>`,
	} {
		if !strings.Contains(item, want) {
			t.Errorf("overlap item lacks %s\nitem: %s", want, item)
		}
	}
	// No event hash is shown as text: strip the tags, then look.
	visible := html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(item, ""))
	if strings.Contains(visible, "sha256:") {
		t.Errorf("the overlap shows an event hash: %q", visible)
	}
}
