package witness

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	acrtlog "github.com/acrelay/acrelay/tlog"
)

const exampleNote = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"

func TestParseAddCheckpoint(t *testing.T) {
	body := "old 20852014\nPlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\njrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=\n\n" + exampleNote
	req, err := ParseAddCheckpoint([]byte(body))
	if err != nil || req.OldSize != 20852014 || len(req.Proof) != 2 || string(req.Note) != exampleNote || req.Proof[1][0] != 0x8e {
		t.Fatalf("%+v, %v", req, err)
	}
	if req, err := ParseAddCheckpoint([]byte("old 0\n\n" + exampleNote)); err != nil || req.OldSize != 0 || len(req.Proof) != 0 {
		t.Fatalf("old 0: %+v, %v", req, err)
	}
	for _, bad := range []string{
		"", "old 1", "old 01\n\n" + exampleNote, "old -1\n\n" + exampleNote, "old  1\n\n" + exampleNote, "Old 1\n\n" + exampleNote,
		"old 1\nAAAA\n\n" + exampleNote, "old 1\n\n", "old 1\n" + exampleNote,
		"old 1\n" + strings.Repeat("PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n", 64) + "\n" + exampleNote,
	} {
		if _, err := ParseAddCheckpoint([]byte(bad)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseAddCheckpoint(%.40q) = %v, want ErrBadRequest", bad, err)
		}
	}
	c, err := ParseForeign("o.example/log\n5\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\nextension line\n")
	if err != nil || c.Origin != "o.example/log" || c.Size != 5 {
		t.Fatalf("ParseForeign with an extension: %+v, %v", c, err)
	}
	if _, err := ParseForeign("o.example/log\n5\n"); !errors.Is(err, acrtlog.ErrBadCheckpoint) {
		t.Fatalf("two lines: %v", err)
	}
}

func FuzzParseAddCheckpoint(f *testing.F) {
	f.Add([]byte("old 3\nPlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n\n" + exampleNote))
	f.Add([]byte("old 0\n\nx"))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ParseAddCheckpoint(b)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not ErrBadRequest", err)
			}
			return
		}
		if req.OldSize < 0 || len(req.Proof) > MaxProofLines || len(req.Note) == 0 || !bytes.HasSuffix(b, req.Note) {
			t.Fatalf("parsed %q as %+v", b, req)
		}
		// The parse is canonical: the client's body is the one parsed.
		if m := req.Marshal(); !bytes.Equal(m, b) {
			t.Fatalf("parsed %q, marshalled %q", b, m)
		}
	})
}
