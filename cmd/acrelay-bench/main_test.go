package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var buildOnce struct {
	sync.Once
	dir string
	err error
}

// benchBinary builds acrelay-bench and, beside it, acrelay (which the
// bench finds there for its relay runs) once per test binary, and returns
// acrelay-bench's path. The directory is removed in TestMain.
func benchBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "acrelay-bench-test-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.dir = dir
		for _, b := range []struct{ out, pkg string }{{"acrelay-bench", "."}, {"acrelay", "../acrelay"}} {
			out, err := exec.Command("go", "build", "-tags", "goolm", "-o", filepath.Join(dir, b.out), b.pkg).CombinedOutput()
			if err != nil {
				buildOnce.err = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return filepath.Join(buildOnce.dir, "acrelay-bench")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.dir != "" {
		os.RemoveAll(buildOnce.dir)
	}
	os.Exit(code)
}

// TestRelayBinRequired: a --relay-bin that does not exist fails the run
// before any server starts, and --relay-bin-b is refused with --url.
func TestRelayBinRequired(t *testing.T) {
	err := runBench(context.Background(), benchConfig{Events: 1, Clients: 1, Rounds: 1, RelayBin: filepath.Join(t.TempDir(), "none")}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--relay-bin") {
		t.Errorf("missing --relay-bin: %v", err)
	}
	err = runBench(context.Background(), benchConfig{URL: "http://127.0.0.1:1", Events: 1, Clients: 1, Rounds: 1, RelayBinB: "/bin/true"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not with --url") {
		t.Errorf("--relay-bin-b with --url: %v", err)
	}
}

// httpJSON sends in (if not nil) as JSON with a bearer token and decodes
// the JSON answer.
func httpJSON(t *testing.T, method, url, token string, in any) (int, map[string]any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, body)
	req.Header.Set("Authorization", "Bearer "+token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}
