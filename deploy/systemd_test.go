package deploy_test

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// unit is a systemd unit file: each section's key=value lines, in order
// (a key may repeat, as Environment= does).
type unit map[string][][2]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.HasSuffix(line, "\\") {
				t.Fatalf("%s: line %q: want key=value on one line", path, line)
			}
			u[section] = append(u[section], [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// all returns every value of key in section, in order.
func (u unit) all(section, key string) []string {
	var vs []string
	for _, kv := range u[section] {
		if kv[0] == key {
			vs = append(vs, kv[1])
		}
	}
	return vs
}

// one returns the single value of key in section, failing otherwise.
func (u unit) one(t *testing.T, section, key string) string {
	t.Helper()
	vs := u.all(section, key)
	if len(vs) != 1 {
		t.Fatalf("[%s] %s: %d values %q, want one", section, key, len(vs), vs)
	}
	return vs[0]
}

const unitPath = "systemd/acrelay.service"

// buildRelay builds cmd/acrelay into dir as the release does.
func buildRelay(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "acrelay")
	cmd := exec.Command("go", "build", "-tags", "goolm", "-trimpath", "-o", bin, "./cmd/acrelay")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestSystemdUnitHardening: the unit keeps the hardening the issue asks for.
func TestSystemdUnitHardening(t *testing.T) {
	u := readUnit(t, unitPath)
	for _, kv := range [][2]string{
		{"DynamicUser", "yes"}, {"StateDirectory", "acrelay"}, {"NoNewPrivileges", "yes"},
		{"ProtectSystem", "strict"}, {"SystemCallFilter", "@system-service"},
		{"CapabilityBoundingSet", ""}, {"PrivateTmp", "yes"}, {"ProtectHome", "yes"},
		{"RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"}, {"KillSignal", "SIGTERM"},
	} {
		if got := u.one(t, "Service", kv[0]); got != kv[1] {
			t.Errorf("[Service] %s=%s, want %s", kv[0], got, kv[1])
		}
	}
}

// TestSystemdAnalyzeVerify runs `systemd-analyze verify` on the unit, in a
// root of its own holding the unit, the binary at the unit's ExecStart
// path and the host's system units; any message fails the test (verify
// exits 0 on unknown keys and bad values, and only says so).
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian's systemd package)")
	}
	var system string
	for _, d := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		if _, err := os.Stat(filepath.Join(d, "sysinit.target")); err == nil {
			system = d
			break
		}
	}
	if system == "" {
		t.Skip("no system units (sysinit.target) under /usr/lib/systemd/system: verify needs them")
	}
	u := readUnit(t, unitPath)
	exe := strings.Fields(u.one(t, "Service", "ExecStart"))[0]
	root := t.TempDir()
	bin := buildRelay(t, t.TempDir())
	copyFile(t, bin, filepath.Join(root, exe), 0o755)
	copyFile(t, unitPath, filepath.Join(root, "etc/systemd/system/acrelay.service"), 0o644)
	if err := os.CopyFS(filepath.Join(root, "usr/lib/systemd/system"), os.DirFS(system)); err != nil {
		// symlinks to absolute paths outside the tree are refused: copy what can be
		t.Logf("copying %s: %v (continuing with what was copied)", system, err)
	}
	out, err := exec.Command(sa, "verify", "--man=no", "--root="+root, "acrelay.service").CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify acrelay.service: %v\n%s", err, out)
	}
}

func copyFile(t *testing.T, from, to string, mode fs.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// envVar matches ${NAME} and $NAME as systemd expands them in ExecStart.
var envVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// TestSystemdExecStart runs the unit's ExecStart line as written, with the
// unit's Environment= lines and the $STATE_DIRECTORY systemd gives it,
// against a temporary state directory. Three things differ from systemd,
// each because this is a shared test machine: the binary is the one just
// built (not /usr/local/bin/acrelay), ACRELAY_ADDR keeps the unit's host
// with a free port, and ACRELAY_OPERATOR_TOKEN stands for what
// /etc/acrelay/env would hold. It posts an event, stops the relay with the
// unit's KillSignal (exit 0 within TimeoutStopSec), starts it again and
// reads the same bytes back.
func TestSystemdExecStart(t *testing.T) {
	u := readUnit(t, unitPath)
	state := filepath.Join(t.TempDir(), u.one(t, "Service", "StateDirectory"))
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	op := randomToken()
	env := map[string]string{"STATE_DIRECTORY": state, "PATH": "/usr/local/bin:/usr/bin:/bin", "ACRELAY_OPERATOR_TOKEN": op}
	var addr string
	for _, e := range u.all("Service", "Environment") {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			t.Fatalf("Environment=%s: want NAME=value", e)
		}
		if k == "ACRELAY_ADDR" {
			host, _, _ := strings.Cut(v, ":")
			if host != "127.0.0.1" {
				t.Fatalf("the unit listens on %s: want loopback behind a reverse proxy", v)
			}
			v = host + ":" + strconv.Itoa(port)
			addr = v
		}
		env[k] = v
	}
	if addr == "" {
		t.Fatal("the unit sets no ACRELAY_ADDR")
	}
	args := strings.Fields(u.one(t, "Service", "ExecStart"))
	for i, a := range args {
		args[i] = envVar.ReplaceAllStringFunc(a, func(m string) string {
			name := strings.Trim(m, "${}")
			v, ok := env[name]
			if !ok {
				t.Fatalf("ExecStart names $%s, which neither the unit nor systemd sets", name)
			}
			return v
		})
	}
	if want := []string{"/usr/local/bin/acrelay", "serve", "--data-dir", state}; strings.Join(args, " ") != strings.Join(want, " ") {
		t.Fatalf("ExecStart expands to %q, want %q", args, want)
	}
	args[0] = buildRelay(t, t.TempDir())
	stopSignal := map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT}[u.one(t, "Service", "KillSignal")]
	stopTimeout, err := time.ParseDuration(u.one(t, "Service", "TimeoutStopSec") + "s")
	if err != nil || stopSignal == 0 {
		t.Fatalf("KillSignal/TimeoutStopSec: %v", err)
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	base := "http://" + addr

	start := func() (*exec.Cmd, func() string) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = environ
		cmd.Dir = "/"
		var mu sync.Mutex
		var out strings.Builder
		w := writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })
		cmd.Stdout, cmd.Stderr = w, w
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		logs := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
		waitHealthy(t, base, 30*time.Second, logs)
		return cmd, logs
	}
	stop := func(cmd *exec.Cmd, logs func() string) {
		if err := cmd.Process.Signal(stopSignal); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("relay after %s: %v (systemd counts that a failure)\n%s", stopSignal, err, logs())
			}
		case <-time.After(stopTimeout):
			t.Fatalf("relay still running %s after %s (systemd would SIGKILL it)\n%s", stopTimeout, stopSignal, logs())
		}
	}

	cmd, logs := start()
	posted := postEvent(t, base, op)
	stop(cmd, logs)
	if !strings.Contains(logs(), `"msg":"relay listening"`) {
		t.Fatalf("no JSON log line \"relay listening\" (the unit sets ACRELAY_LOG_FORMAT=json):\n%s", logs())
	}
	if _, err := os.Stat(filepath.Join(state, "acrelay.db")); err != nil {
		t.Fatalf("no database in the state directory: %v", err)
	}
	cmd, logs = start()
	readBack(t, base, posted)
	stop(cmd, logs)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
