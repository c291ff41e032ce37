package witness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/store"
	acrtlog "github.com/acrelay/acrelay/tlog"
	"github.com/acrelay/acrelay/witness"
)

// memTree is an in-memory RFC 6962 tree (x/mod tlog's stored hashes).
type memTree struct{ hashes []tlog.Hash }

func (m *memTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x >= int64(len(m.hashes)) {
			return nil, fmt.Errorf("hash %d not stored", x)
		}
		out[i] = m.hashes[x]
	}
	return out, nil
}

func (m *memTree) add(t *testing.T, n int64, leaf string) {
	t.Helper()
	hs, err := tlog.StoredHashes(n, []byte(leaf), m)
	if err != nil {
		t.Fatal(err)
	}
	m.hashes = append(m.hashes, hs...)
}

func (m *memTree) root(t *testing.T, n int64) tlog.Hash {
	t.Helper()
	h, err := tlog.TreeHash(n, m)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func tree(t *testing.T, leaves ...string) *memTree {
	m := &memTree{}
	for i, l := range leaves {
		m.add(t, int64(i), l)
	}
	return m
}

func logKey(t *testing.T, name string) (note.Signer, note.Verifier) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(nil, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

func signCheckpoint(t *testing.T, s note.Signer, c witness.Checkpoint) []byte {
	t.Helper()
	msg, err := note.Sign(&note.Note{Text: c.Text()}, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

var ctx = context.Background()

const origin = "relay-a.example/v1/00000000-0000-4000-8000-000000000001"

// TestCosignRoundTrip: a checkpoint signed by the log key, cosigned with
// a witness key created by NewKey, verifies with OpenCosigned under the
// published verifier key; the cosignature line is C2SP
// tlog-cosignature/v1 as checked here from the text alone (key ID =
// SHA-256(name ‖ "\n" ‖ 0x04 ‖ public key)[:4]; signature over
// "cosignature/v1\ntime <t>\n" ‖ body; 8-byte big-endian timestamp).
func TestCosignRoundTrip(t *testing.T) {
	ls, lv := logKey(t, "relay-a.example")
	skey, err := witness.NewKey("relay-b.example/witness")
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := witness.VerifierKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := witness.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	wv, err := witness.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	m := tree(t, "a", "b", "c")
	c := witness.Checkpoint{Origin: origin, Size: 3, Root: m.root(t, 3)}
	msg := signCheckpoint(t, ls, c)
	if _, err := witness.VerifierKey("relay-b.example/witness+01020304+AQID"); err == nil {
		t.Fatal("VerifierKey of a verifier key: no error")
	}
	got, n, err := witness.Open(msg, lv, origin)
	if err != nil || got != c {
		t.Fatalf("Open = %+v, %v; want %+v", got, err, c)
	}
	before := time.Now().Truncate(time.Second)
	cosigned, line, err := witness.Cosign(ws, n)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(cosigned, msg) || string(cosigned[len(msg):]) != line {
		t.Fatalf("cosigned note = %q, want %q followed by %q", cosigned, msg, line)
	}

	// The line, from C2SP's text alone.
	parts := strings.SplitN(vkey, "+", 3)
	keyData, _ := base64.StdEncoding.DecodeString(parts[2])
	if parts[0] != "relay-b.example/witness" || len(keyData) != 33 || keyData[0] != 0x04 {
		t.Fatalf("verifier key %q: want name relay-b.example/witness and type 0x04 with 32 key bytes", vkey)
	}
	pub := ed25519.PublicKey(keyData[1:])
	id := sha256.Sum256(append([]byte("relay-b.example/witness\n\x04"), pub...))
	if parts[1] != fmt.Sprintf("%08x", id[:4]) {
		t.Fatalf("verifier key hash %s, want %x", parts[1], id[:4])
	}
	if !strings.HasPrefix(line, "— relay-b.example/witness ") || !strings.HasSuffix(line, "\n") {
		t.Fatalf("line %q", line)
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.TrimPrefix(line, "— relay-b.example/witness "), "\n"))
	if err != nil || len(sig) != 4+8+64 || !bytes.Equal(sig[:4], id[:4]) {
		t.Fatalf("signature %x: want key id %x, 8-byte time, 64-byte Ed25519", sig, id[:4])
	}
	ts := binary.BigEndian.Uint64(sig[4:12])
	if at := time.Unix(int64(ts), 0); at.Before(before) || at.After(time.Now()) {
		t.Fatalf("timestamp %v not between %v and now", at, before)
	}
	signed := "cosignature/v1\ntime " + strconv.FormatUint(ts, 10) + "\n" + c.Text()
	if !ed25519.Verify(pub, []byte(signed), sig[12:]) {
		t.Fatalf("Ed25519 signature does not verify over %q", signed)
	}
	// The log key's own signature is not a cosignature: the cosigned
	// message is domain-separated from the checkpoint text.
	if ed25519.Verify(pub, []byte(c.Text()), sig[12:]) {
		t.Fatal("cosignature verifies over the bare checkpoint text")
	}

	gc, text, cs, err := witness.OpenCosigned(cosigned, lv, origin, []note.Verifier{wv}, time.Now(), time.Minute)
	if err != nil || gc != c || !bytes.Equal(text, []byte(c.Text())) || len(cs) != 1 || cs[0].Name != "relay-b.example/witness" || cs[0].Line != line ||
		cs[0].SignedAt.Unix() != int64(ts) || cs[0].SignedAt.Location() != time.UTC {
		t.Fatalf("OpenCosigned = %+v, %q, %+v, %v", gc, text, cs, err)
	}
}

// TestOpenCosignedRefusals: each refusal has its error.
func TestOpenCosignedRefusals(t *testing.T) {
	ls, lv := logKey(t, "relay-a.example")
	os, _ := logKey(t, "relay-a.example")
	skey, _ := witness.NewKey("relay-b.example/witness")
	vkey, _ := witness.VerifierKey(skey)
	ws, _ := witness.NewSigner(skey)
	wv, _ := witness.NewVerifier(vkey)
	other, _ := witness.NewKey("relay-c.example/witness")
	osg, _ := witness.NewSigner(other)
	c := witness.Checkpoint{Origin: origin, Size: 1, Root: tree(t, "a").root(t, 1)}
	cosign := func(s note.Signer, msg []byte) []byte {
		_, n, err := witness.Open(msg, lv, "")
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := witness.Cosign(s, n)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	good := cosign(ws, signCheckpoint(t, ls, c))
	tampered := bytes.Replace(good, []byte("\n1\n"), []byte("\n2\n"), 1)
	// badCosig flips one bit of the signature in the note's last line (the
	// witness's cosignature): a known key whose signature does not verify.
	badCosig := func(msg []byte) []byte {
		lines := bytes.Split(bytes.TrimSuffix(msg, []byte("\n")), []byte("\n"))
		last := lines[len(lines)-1]
		i := bytes.LastIndexByte(last, ' ')
		sig, err := base64.StdEncoding.DecodeString(string(last[i+1:]))
		if err != nil {
			t.Fatal(err)
		}
		sig[len(sig)-1] ^= 1
		lines[len(lines)-1] = append(append([]byte{}, last[:i+1]...), base64.StdEncoding.EncodeToString(sig)...)
		return append(bytes.Join(lines, []byte("\n")), '\n')
	}
	// A note signed by another key of the same name, cosigned by the
	// witness: the log key does not verify it.
	foreign, err := note.Sign(&note.Note{Text: c.Text()}, os, ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		msg  []byte
		org  string
		want error
	}{
		{"tampered size", tampered, origin, witness.ErrNote},
		{"not signed by the log key", foreign, origin, witness.ErrNote},
		{"another origin", good, origin + "x", witness.ErrOrigin},
		{"only the log's signature", signCheckpoint(t, ls, c), origin, witness.ErrNoCosignature},
		{"an unknown witness only", cosign(osg, signCheckpoint(t, ls, c)), origin, witness.ErrNoCosignature},
		{"the witness's cosignature does not verify", badCosig(good), origin, witness.ErrNoCosignature},
		{"a bad cosignature on a tampered note", badCosig(tampered), origin, witness.ErrNote},
		{"too large", append(bytes.Repeat([]byte("x"), witness.MaxNoteBytes), good...), origin, witness.ErrNote},
		{"extension line", signCheckpoint(t, ls, c)[:0], origin, witness.ErrNote},
	} {
		msg := tc.msg
		if tc.name == "extension line" {
			n, err := note.Sign(&note.Note{Text: c.Text() + "ext\n"}, ls, ws)
			if err != nil {
				t.Fatal(err)
			}
			msg = n
		}
		_, _, _, err := witness.OpenCosigned(msg, lv, tc.org, []note.Verifier{wv}, time.Now(), time.Minute)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	// A cosignature dated in the future (beyond the skew) is refused.
	if _, _, _, err := witness.OpenCosigned(good, lv, origin, []note.Verifier{wv}, time.Now().Add(-time.Hour), time.Minute); !errors.Is(err, witness.ErrNoCosignature) {
		t.Errorf("future cosignature: err %v, want ErrNoCosignature", err)
	}
}

// memState is an in-memory witness.LogState; moved, when set, is what
// another writer stored meanwhile: the compare-and-set fails.
type memState struct {
	held  map[string]store.WitnessedLog
	moved *store.WitnessedLog
}

func (m *memState) WitnessedLog(_ context.Context, origin string) (store.WitnessedLog, error) {
	l, ok := m.held[origin]
	if !ok {
		return store.WitnessedLog{}, store.ErrNotFound
	}
	return l, nil
}

func (m *memState) SaveWitnessedLog(_ context.Context, l store.WitnessedLog, oldSize int64) (bool, error) {
	if m.moved != nil {
		m.held[l.Origin] = *m.moved
		return false, nil
	}
	if m.held[l.Origin].Size != oldSize || l.Size < oldSize {
		return false, nil
	}
	m.held[l.Origin] = l
	return true, nil
}

// TestAdd: the witness's decisions (C2SP tlog-witness add-checkpoint)
// on real trees, with the outcome each is answered with: growth with a
// valid proof, the same checkpoint again and a first one are cosigned
// and stored; a fork at one size, a newer checkpoint whose proof does
// not join (a rewritten leaf), no proof, a proof from size 0 and a
// size-0 checkpoint of another root are 422; an older checkpoint or old
// above the size is 400; old not the size held is 409 with it, as is a
// compare-and-set another writer won; an unknown origin 404; a
// checkpoint signed by another key 403. Nothing but a cosignature
// changes the state.
func TestAdd(t *testing.T) {
	honest := tree(t, "a", "b", "c", "d", "e", "f", "g")
	forked := tree(t, "a", "b", "c", "X", "e", "f", "g")
	ls, lv := logKey(t, "log.example")
	otherKey, _ := logKey(t, "log.example")
	skey, err := witness.NewKey("relay-b.example/witness")
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := witness.VerifierKey(skey)
	wv, err := witness.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	signer := func(context.Context) (note.Signer, error) { return witness.NewSigner(skey) }
	at := func(m *memTree, n int64) witness.Checkpoint {
		return witness.Checkpoint{Origin: origin, Size: n, Root: m.root(t, n)}
	}
	prove := func(m *memTree, small, large int64) tlog.TreeProof {
		p, err := tlog.ProveTree(large, small, m)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	logs := map[string][]note.Verifier{origin: {lv}}
	empty := witness.Checkpoint{}
	for _, tc := range []struct {
		name  string
		held  witness.Checkpoint // Size 0: none
		old   int64
		next  witness.Checkpoint
		proof tlog.TreeProof
		other bool // signed by another key
		moved bool
		want  any // nil (cosigned), an error, a *ConflictError or an *InconsistentError kind
	}{
		{"first", empty, 0, at(honest, 5), nil, false, false, nil},
		{"grown", at(honest, 3), 3, at(honest, 7), prove(honest, 3, 7), false, false, nil},
		{"same", at(honest, 5), 5, at(honest, 5), nil, false, false, nil},
		{"empty tree", empty, 0, witness.Checkpoint{Origin: origin, Root: acrtlog.EmptyRoot}, nil, false, false, nil},
		{"fork at one size", at(honest, 5), 5, at(forked, 5), nil, false, false, store.SplitViewFork},
		{"newer, rewritten", at(honest, 5), 5, at(forked, 7), prove(forked, 5, 7), false, false, store.SplitViewInconsistent},
		{"newer, proof of the other tree", at(honest, 5), 5, at(forked, 7), prove(honest, 5, 7), false, false, store.SplitViewInconsistent},
		{"newer, no proof", at(honest, 3), 3, at(honest, 7), nil, false, false, store.SplitViewInconsistent},
		{"a proof from size 0", empty, 0, at(honest, 7), prove(honest, 3, 7), false, false, store.SplitViewInconsistent},
		{"size 0, another root", empty, 0, witness.Checkpoint{Origin: origin, Root: honest.root(t, 1)}, nil, false, false, store.SplitViewInconsistent},
		{"older", at(honest, 7), 7, at(honest, 3), nil, false, false, witness.ErrBadRequest},
		{"old not the size held", at(honest, 5), 3, at(honest, 7), prove(honest, 3, 7), false, false, &witness.ConflictError{Size: 5}},
		{"old above none held", empty, 3, at(honest, 7), prove(honest, 3, 7), false, false, &witness.ConflictError{Size: 0}},
		{"lost the compare-and-set", at(honest, 3), 3, at(honest, 5), prove(honest, 3, 5), false, true, &witness.ConflictError{Size: 6}},
		{"unknown origin", empty, 0, witness.Checkpoint{Origin: "other.example/log", Size: 1, Root: honest.root(t, 1)}, nil, false, false, witness.ErrLogUnknown},
		{"another key", empty, 0, at(honest, 5), nil, true, false, witness.ErrLogSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &memState{held: map[string]store.WitnessedLog{}}
			if tc.held.Size > 0 {
				st.held[origin] = store.WitnessedLog{Origin: origin, Size: tc.held.Size, Root: tc.held.Root, Checkpoint: signCheckpoint(t, ls, tc.held)}
			}
			if tc.moved {
				st.moved = &store.WitnessedLog{Origin: origin, Size: 6, Root: honest.root(t, 6)}
			}
			before := st.held[origin]
			s := ls
			if tc.other {
				s = otherKey
			}
			msg := signCheckpoint(t, s, tc.next)
			res, err := witness.Add(ctx, witness.AddCheckpoint{OldSize: tc.old, Proof: tc.proof, Note: msg}, logs, st, signer)
			var conflict *witness.ConflictError
			var bad *witness.InconsistentError
			switch want := tc.want.(type) {
			case nil:
				if err != nil {
					t.Fatalf("Add: %v, want a cosignature", err)
				}
				c, _, cs, err := witness.OpenCosigned(res.Note, lv, origin, []note.Verifier{wv}, time.Now(), time.Minute)
				if err != nil || c != tc.next || len(cs) != 1 || cs[0].Line != res.Line || !bytes.HasPrefix(res.Note, msg) {
					t.Fatalf("cosigned note %q (line %q): %+v %v", res.Note, res.Line, c, err)
				}
				if got := st.held[origin]; got.Size != tc.next.Size || got.Root != tc.next.Root || !bytes.Equal(got.Checkpoint, res.Note) {
					t.Fatalf("state %+v, want the cosigned note at %d", got, tc.next.Size)
				}
				return
			case string:
				if !errors.As(err, &bad) || bad.Kind != want || bad.Cosigned.Size != tc.held.Size {
					t.Fatalf("Add: %v, want %s against size %d", err, want, tc.held.Size)
				}
			case *witness.ConflictError:
				if !errors.As(err, &conflict) || *conflict != *want {
					t.Fatalf("Add: %v, want a conflict at %d", err, want.Size)
				}
				if tc.moved {
					return
				}
			case error:
				if !errors.Is(err, want) {
					t.Fatalf("Add: %v, want %v", err, want)
				}
			}
			if got := st.held[origin]; got.Size != before.Size || !bytes.Equal(got.Checkpoint, before.Checkpoint) {
				t.Fatalf("state changed to %+v", got)
			}
		})
	}
}

// TestWithCosignatures: the held cosignatures on the served text are
// appended once each, in the order given; those on another text are not;
// at most MaxCosignatures.
func TestWithCosignatures(t *testing.T) {
	ls, lv := logKey(t, "relay-a.example")
	m := tree(t, "a", "b")
	c2 := witness.Checkpoint{Origin: origin, Size: 2, Root: m.root(t, 2)}
	c1 := witness.Checkpoint{Origin: origin, Size: 1, Root: m.root(t, 1)}
	msg := signCheckpoint(t, ls, c2)
	var held []store.Cosignature
	var verifiers []note.Verifier
	var lines []string
	for i := range witness.MaxCosignatures + 2 {
		skey, _ := witness.NewKey(fmt.Sprintf("w%02d.example", i))
		s, _ := witness.NewSigner(skey)
		vkey, _ := witness.VerifierKey(skey)
		v, _ := witness.NewVerifier(vkey)
		verifiers = append(verifiers, v)
		_, n, err := witness.Open(msg, lv, origin)
		if err != nil {
			t.Fatal(err)
		}
		_, line, err := witness.Cosign(s, n)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
		held = append(held, store.Cosignature{KeyName: s.Name(), Size: 2, Body: []byte(c2.Text()), Line: line})
	}
	stale := store.Cosignature{KeyName: "old.example", Size: 1, Body: []byte(c1.Text()), Line: "— old.example AAAA\n"}
	got := witness.WithCosignatures(msg, append([]store.Cosignature{stale, held[0], held[0]}, held[1:]...))
	want := string(msg) + strings.Join(lines[:witness.MaxCosignatures], "")
	if string(got) != want {
		t.Fatalf("WithCosignatures =\n%q\nwant\n%q", got, want)
	}
	_, _, cs, err := witness.OpenCosigned(got, lv, origin, verifiers, time.Now(), time.Minute)
	if err != nil || len(cs) != witness.MaxCosignatures {
		t.Fatalf("served note opens with %d cosignatures, %v; want %d", len(cs), err, witness.MaxCosignatures)
	}
	if got := witness.WithCosignatures(msg, nil); !bytes.Equal(got, msg) {
		t.Fatalf("WithCosignatures(none) = %q", got)
	}
}

// FuzzOpenCosigned: any bytes are refused or open to a checkpoint whose
// canonical text is the note's text; nothing panics.
func FuzzOpenCosigned(f *testing.F) {
	skey, vkey, _ := note.GenerateKey(nil, "relay-a.example")
	ls, _ := note.NewSigner(skey)
	lv, _ := note.NewVerifier(vkey)
	wkey, _ := witness.NewKey("relay-b.example/witness")
	wvk, _ := witness.VerifierKey(wkey)
	ws, _ := witness.NewSigner(wkey)
	wv, _ := witness.NewVerifier(wvk)
	c := witness.Checkpoint{Origin: origin, Size: 3, Root: tlog.RecordHash([]byte("x"))}
	msg, _ := note.Sign(&note.Note{Text: c.Text()}, ls, ws)
	f.Add(msg)
	f.Add([]byte(string(c.Text()) + "\n— relay-a.example AAAA\n"))
	f.Add([]byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, text, cs, err := witness.OpenCosigned(b, lv, "", []note.Verifier{wv}, time.Now(), time.Minute)
		if err != nil {
			return
		}
		if !bytes.Equal([]byte(got.Text()), text) || len(cs) == 0 || got.Size < 0 {
			t.Fatalf("opened %q to %+v, %q, %d cosignatures", b, got, text, len(cs))
		}
	})
}
