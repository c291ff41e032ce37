package relay_test

import (
	"strings"
	"testing"
)

// TestProjectIsolation: project A's tokens hit every route that names
// project B's resources and get 403/404, with nothing of B in the body,
// the headers or the ETag.
func TestProjectIsolation(t *testing.T) {
	e := newEnv(t)
	aPID, aTok := e.newProject("")
	bPID, bTok := e.newProject("")
	b := e.newAgent(bPID, bTok)
	bEvent := b.intent("shared-repo", "secret plan of B")
	mustStatus(t, e.post(b, bEvent), 201)
	bTokenID := e.do("GET", "/v1/whoami", e.newToken(bPID, "read"), nil).json(t)["token_id"].(string)
	aAgent := e.newAgent(aPID, aTok)

	bSecrets := []string{bPID, b.IdentityID, b.KeyID, bEvent.ID, "secret plan", bTokenID}
	aRead := e.newToken(aPID, "read")
	aAppend := e.newToken(aPID, "append")

	cases := []struct {
		name, method, path, tok string
		body                    []byte
		status                  int
	}{
		{"create identity in B", "POST", "/v1/admin/projects/" + bPID + "/identities", aTok, []byte(`{}`), 404},
		{"create token in B", "POST", "/v1/admin/projects/" + bPID + "/tokens", aTok, []byte(`{"scopes":["read"]}`), 404},
		{"add key to B identity", "POST", "/v1/admin/identities/" + b.IdentityID + "/keys", aTok, []byte(`{"public_key_b64url":"A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"}`), 404},
		{"deactivate B identity", "POST", "/v1/admin/identities/" + b.IdentityID + "/deactivate", aTok, nil, 404},
		{"revoke B key", "POST", "/v1/admin/keys/" + b.KeyID + "/revoke", aTok, nil, 404},
		{"revoke B token", "DELETE", "/v1/admin/tokens/" + bTokenID, aTok, nil, 404},
		{"list B's identities", "GET", "/v1/admin/projects/" + bPID + "/identities", aTok, nil, 404},
		{"list B's tokens", "GET", "/v1/admin/projects/" + bPID + "/tokens", aTok, nil, 404},
		{"list B identity's keys", "GET", "/v1/admin/identities/" + b.IdentityID + "/keys", aTok, nil, 404},
		{"list B identity's keys naming B", "GET", "/v1/admin/identities/" + b.IdentityID + "/keys?project_id=" + bPID, aTok, nil, 404},
		{"read token cannot list tokens", "GET", "/v1/admin/projects/" + aPID + "/tokens", aRead, nil, 403},
		{"create project without operator", "POST", "/v1/admin/projects", aTok, []byte(`{}`), 403},
		{"post B's event with A's token", "POST", "/v1/correspondence/events", aTok, eventJSON(t, bEvent), 403},
		{"read events of the same repository id", "GET", "/v1/correspondence/events?repository_id=shared-repo", aTok, nil, 200},
		{"atom of the same repository id", "GET", "/v1/correspondence/events.atom?repository_id=shared-repo", aTok, nil, 200},
		// Scopes are independent.
		{"read token cannot append", "POST", "/v1/correspondence/events", aRead, eventJSON(t, aAgent.intent("r", "x")), 403},
		{"read token cannot administer", "POST", "/v1/admin/projects/" + aPID + "/identities", aRead, []byte(`{}`), 403},
		{"append token cannot read", "GET", "/v1/correspondence/events?repository_id=r", aAppend, nil, 403},
		{"append token cannot administer", "POST", "/v1/admin/projects/" + aPID + "/tokens", aAppend, []byte(`{"scopes":["read"]}`), 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.tok, tc.body)
			mustStatus(t, r, tc.status)
			var hdr strings.Builder
			for k, v := range r.Header {
				hdr.WriteString(k + ": " + strings.Join(v, ",") + "\n")
			}
			for _, s := range bSecrets {
				if strings.Contains(string(r.Body), s) {
					t.Errorf("body leaks %q: %s", s, r.Body)
				}
				// Paths echo the caller's own URL in Link self; ids there came from the caller.
				if s != bPID && s != b.IdentityID && s != b.KeyID && s != bTokenID && strings.Contains(hdr.String(), s) {
					t.Errorf("headers leak %q", s)
				}
			}
		})
	}

	// A's empty read of the shared repository id is byte-identical (same
	// ETag) to the read of a repository id that exists nowhere, so B's
	// activity cannot be inferred.
	x := e.do("GET", "/v1/correspondence/events?repository_id=shared-repo", aTok, nil)
	y := e.do("GET", "/v1/correspondence/events?repository_id=shared-repo", aRead, nil)
	if x.Header.Get("ETag") != y.Header.Get("ETag") || !strings.Contains(string(x.Body), `"events":[]`) {
		t.Errorf("A sees something of B: %s", x.Body)
	}

	// Unknown ids and ids of another project answer the same.
	unknown := e.do("POST", "/v1/admin/identities/00000000-0000-4000-8000-000000000000/deactivate", aTok, nil)
	other := e.do("POST", "/v1/admin/identities/"+b.IdentityID+"/deactivate", aTok, nil)
	if unknown.Status != other.Status || string(unknown.Body) != string(other.Body) {
		t.Errorf("unknown %d %s vs other project's %d %s", unknown.Status, unknown.Body, other.Status, other.Body)
	}
	// Ids are scoped to their project: A may use B's identity id for an
	// identity of its own (no 409 oracle, no squatting), and that changes
	// nothing for B.
	r := e.do("POST", "/v1/admin/projects/"+aPID+"/identities", aTok, []byte(`{"identity_id":"`+b.IdentityID+`"}`))
	mustStatus(t, r, 201)
	mustStatus(t, e.do("POST", "/v1/admin/identities/"+b.IdentityID+"/deactivate", aTok, nil), 200)
	// The operator names the project explicitly.
	mustStatus(t, e.do("POST", "/v1/admin/identities/"+b.IdentityID+"/deactivate", operatorToken, nil), 400)
	mustStatus(t, e.do("POST", "/v1/admin/keys/"+b.KeyID+"/revoke?project_id="+aPID, operatorToken, nil), 404)

	// B's resources are untouched.
	mustStatus(t, e.post(b, b.intent("shared-repo", "still active")), 201)
}
