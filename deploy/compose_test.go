package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestComposeRelayAndPostgres runs deploy/compose.yaml, as written, with
// Debian's podman-compose: PostgreSQL from an image made of this machine's
// Debian packages (deploy/postgres/) and two relays from the image of
// deploy/Containerfile (no registry is reachable here, so neither image is
// pulled or built by compose). It posts through relay-a, reads the record
// through relay-b (one database), SIGKILLs relay-a's container, starts it
// again and reads the same bytes back.
func TestComposeRelayAndPostgres(t *testing.T) {
	p := newPodman(t)
	compose := os.Getenv("ACRELAY_PODMAN_COMPOSE")
	if compose == "" {
		var err error
		if compose, err = exec.LookPath("podman-compose"); err != nil {
			t.Skip("podman-compose not installed (scripts/provision_podman.sh installs Debian's; ACRELAY_PODMAN_COMPOSE names it)")
		}
	}
	if _, err := os.Stat("/usr/lib/postgresql"); err != nil {
		t.Skip("Debian's postgresql is not installed: the PostgreSQL image is made from its files (scripts/test.sh installs it)")
	}
	const relayImage, pgImage = "localhost/acrelay:compose-test", "localhost/acrelay-postgres:compose-test"
	p.buildImage(t, relayImage)
	p.canRun(t, relayImage)
	root := repoRoot(t)
	pgctx := filepath.Join(p.dir, "pg-context")
	if out, err := exec.Command(filepath.Join(root, "deploy", "postgres", "image-root.sh"), filepath.Join(pgctx, "root")).CombinedOutput(); err != nil {
		t.Fatalf("deploy/postgres/image-root.sh: %v\n%s", err, out)
	}
	p.must(t, "build", "--format", "docker", "--quiet", "--tag", pgImage, "--file", filepath.Join(root, "deploy", "postgres", "Containerfile"), pgctx)

	// compose.yaml as written, in a directory with its secrets beside it
	// (compose reads ./secrets/*, which the repository does not hold).
	dir := filepath.Join(p.dir, "compose")
	copyFile(t, filepath.Join(root, "deploy", "compose.yaml"), filepath.Join(dir, "compose.yaml"), 0o644)
	op := randomToken()
	pgPassword := strings.TrimPrefix(randomToken(), "deploy-test-")
	for name, v := range map[string]string{
		"pg_password":    pgPassword,
		"database_url":   "postgres://acrelay:" + pgPassword + "@postgres:5432/acrelay?sslmode=disable",
		"operator_token": op,
	} {
		copyBytes(t, []byte(v+"\n"), filepath.Join(dir, "secrets", name))
	}
	portA, portB := freePort(t), freePort(t)
	const project = "acrelaytest"
	run := func(args ...string) (string, error) {
		cmd := exec.Command(compose, append([]string{"--podman-path", p.bin, "--podman-args", strings.Join(p.flags, " "),
			"--project-name", project, "--file", filepath.Join(dir, "compose.yaml")}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), p.env...)
		cmd.Env = append(cmd.Env, "ACRELAY_IMAGE="+relayImage, "ACRELAY_POSTGRES_IMAGE="+pgImage,
			fmt.Sprintf("ACRELAY_PORT_A=%d", portA), fmt.Sprintf("ACRELAY_PORT_B=%d", portB))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := run("down", "--volumes"); err != nil {
			t.Logf("podman-compose down: %v\n%s", err, out)
		}
	})
	if out, err := run("up", "--detach", "--no-build"); err != nil {
		t.Fatalf("podman-compose up: %v\n%s", err, out)
	}
	relayA := project + "_relay-a_1"
	logs := func() string {
		return "relay-a:\n" + p.logs(relayA) + "\npostgres:\n" + p.logs(project+"_postgres_1")
	}
	a, b := fmt.Sprintf("http://127.0.0.1:%d", portA), fmt.Sprintf("http://127.0.0.1:%d", portB)
	// the relays exit 1 until PostgreSQL answers and compose's restart:
	// on-failure starts them again (podman-compose 1.0.3 orders by
	// depends_on but does not wait for service_healthy)
	waitHealthy(t, a, 3*time.Minute, logs)
	waitHealthy(t, b, 3*time.Minute, logs)

	posted := postEvent(t, a, op)
	readBack(t, b, posted)

	p.must(t, "kill", "--signal", "KILL", relayA)
	if out, err := run("start", "relay-a"); err != nil {
		t.Fatalf("podman-compose start relay-a: %v\n%s", err, out)
	}
	waitHealthy(t, a, 2*time.Minute, logs)
	readBack(t, a, posted)
	if !strings.Contains(p.logs(relayA), `"store":"postgres"`) {
		t.Fatalf("relay-a did not run on PostgreSQL:\n%s", logs())
	}
}

func copyBytes(t *testing.T, b []byte, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
