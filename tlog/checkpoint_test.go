package tlog

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// testKey is a log key from a fixed seed, so its signatures are fixed
// (Ed25519 is deterministic).
func testKey(t testing.TB) (note.Signer, note.Verifier, string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{7}, 32)), "relay.example/acrelay")
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
	return s, v, vkey
}

func TestOrigin(t *testing.T) {
	for _, c := range [][3]string{
		{"https://relay.example", "p1", "relay.example/p1"},
		{"https://Relay.Example:8443/acrelay/", "p1", "relay.example:8443/acrelay/p1"},
		{"http://127.0.0.1:8080/?x=1#f", "proj-2", "127.0.0.1:8080/proj-2"},
	} {
		if got := Origin(c[0], c[1]); got != c[2] {
			t.Errorf("Origin(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

func TestCheckpointSignOpen(t *testing.T) {
	s, v, vkey := testKey(t)
	const wantVkey = "relay.example/acrelay+eefd1230+AepKbGPinFIKvvVQexMuxfmVR3auvr57kkIe6mkURtIs"
	if vkey != wantVkey {
		t.Fatalf("vkey = %q", vkey)
	}
	root, _ := tlog.ParseHash("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
	c := Checkpoint{Origin: "relay.example/acrelay/p1", Size: 1234, Root: root}
	msg, err := SignCheckpoint(s, c)
	if err != nil {
		t.Fatal(err)
	}
	const want = "relay.example/acrelay/p1\n1234\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n" +
		"— relay.example/acrelay 7v0SMAND8Xlcs23rPuPP8EKCxtJW1t+nQSUurt7GihceVUApF/SF+0cwxzNaaLN/TxrTk25a0V1i0wsDEQ16b9z0cA4=\n"
	if string(msg) != want {
		t.Fatalf("note:\n%s\nwant:\n%s", msg, want)
	}
	// The signature line is Ed25519 over the body, after the key hash.
	sig, _ := base64.StdEncoding.DecodeString(string(bytes.TrimSuffix(bytes.SplitN(msg, []byte("\n— relay.example/acrelay "), 2)[1], []byte("\n"))))
	pub, _ := base64.StdEncoding.DecodeString(vkey[len("relay.example/acrelay+")+9:])
	if binary.BigEndian.Uint32(sig) != v.KeyHash() || !ed25519.Verify(pub[1:], []byte(c.Text()), sig[4:]) {
		t.Fatal("signature line is not Ed25519 over the body")
	}
	got, n, err := OpenCheckpoint(msg, v, c.Origin)
	if err != nil || got != c || n.Text != c.Text() || len(n.Sigs) != 1 {
		t.Fatalf("open: %+v %+v %v", got, n, err)
	}
	if _, _, err := OpenCheckpoint(msg, v, "relay.example/acrelay/p2"); !errors.Is(err, ErrBadCheckpoint) {
		t.Errorf("other origin: %v, want ErrBadCheckpoint", err)
	}
	tampered := bytes.Replace(msg, []byte("1234"), []byte("1235"), 1)
	var inv *note.InvalidSignatureError
	if _, _, err := OpenCheckpoint(tampered, v, c.Origin); !errors.As(err, &inv) {
		t.Errorf("changed size: %v, want InvalidSignatureError", err)
	}
	_, other, _ := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{8}, 32)), "relay.example/acrelay")
	ov, _ := note.NewVerifier(other)
	var unv *note.UnverifiedNoteError
	if _, _, err := OpenCheckpoint(msg, ov, c.Origin); !errors.As(err, &unv) {
		t.Errorf("other key: %v, want UnverifiedNoteError", err)
	}
	if _, err := SignCheckpoint(s, Checkpoint{Origin: "a\nb", Size: 1}); !errors.Is(err, ErrBadCheckpoint) {
		t.Errorf("origin with newline: %v", err)
	}
}

func TestParseCheckpointRefuses(t *testing.T) {
	for _, text := range []string{
		"", "o\n1\n", "o\n01\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
		"o\n-1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
		"o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU\n",
		"o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\next\n",
		"\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
		"o\n1\nAAAA\n", "o\n99999999999999999999\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
	} {
		if c, err := ParseCheckpoint(text); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("ParseCheckpoint(%q) = %+v, %v", text, c, err)
		}
	}
}

func FuzzOpenCheckpoint(f *testing.F) {
	s, v, _ := testKey(f)
	msg, _ := SignCheckpoint(s, Checkpoint{Origin: "relay.example/acrelay/p1", Size: 3})
	f.Add(msg)
	f.Add([]byte("relay.example/acrelay/p1\n3\nAAAA\n\n— relay.example/acrelay AAAA\n"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		c, n, err := OpenCheckpoint(msg, v, "relay.example/acrelay/p1")
		if err != nil {
			return
		}
		if n.Text != c.Text() || c.Origin != "relay.example/acrelay/p1" || c.Size < 0 {
			t.Fatalf("opened %+v from %q", c, n.Text)
		}
		again, err := SignCheckpoint(s, c)
		if err != nil || !bytes.HasPrefix(msg, again[:len(c.Text())]) {
			t.Fatalf("re-signed %q, %v", again, err)
		}
	})
}

func TestOpenLogKey(t *testing.T) {
	skey, vkey, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{7}, 32)), "relay.example/acrelay")
	if err != nil {
		t.Fatal(err)
	}
	k, err := OpenLogKey(skey)
	if err != nil || k.VerifierKey != vkey || k.VerifierKey != "relay.example/acrelay+eefd1230+AepKbGPinFIKvvVQexMuxfmVR3auvr57kkIe6mkURtIs" {
		t.Fatalf("OpenLogKey: %+v, %v; want %q", k, err, vkey)
	}
	msg, _ := SignCheckpoint(k.Signer, Checkpoint{Origin: "o", Size: 1})
	if _, _, err := OpenCheckpoint(msg, k.Verifier, "o"); err != nil {
		t.Fatalf("own checkpoint: %v", err)
	}
	s2, _, err := NewLogKey("relay.example")
	if err != nil || !strings.HasPrefix(s2, "PRIVATE+KEY+relay.example+") {
		t.Fatalf("NewLogKey: %v", err)
	}
	if _, err := OpenLogKey(s2); err != nil {
		t.Fatalf("a new key: %v", err)
	}
	for _, bad := range []string{"", vkey, strings.TrimSuffix(skey, "s") + "x", "PRIVATE+KEY+n+00000000+AQ=="} {
		if _, err := OpenLogKey(bad); !errors.Is(err, ErrBadLogKey) || strings.Contains(err.Error(), "PRIVATE") {
			t.Errorf("OpenLogKey(%.20q…) = %v, want ErrBadLogKey", bad, err)
		}
	}
	if _, _, err := NewLogKey("bad name"); err == nil {
		t.Error("NewLogKey with a space: no error")
	}
}
