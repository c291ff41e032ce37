package deploy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImageHoldsStateAcrossRestart builds the release image from
// deploy/Containerfile, runs it as its non-root user with a named volume,
// posts an event, restarts the container and reads the same bytes back;
// the image's HEALTHCHECK (acrelay healthcheck) passes on the running
// container.
func TestImageHoldsStateAcrossRestart(t *testing.T) {
	p := newPodman(t)
	const image = "localhost/acrelay:deploy-test"
	p.buildImage(t, image)

	// The image as built: its user, health check, entry point, and no shell.
	cfg := p.must(t, "image", "inspect", "--format",
		"{{.Config.User}}|{{json .Config.Healthcheck.Test}}|{{json .Config.Entrypoint}}|{{json .Config.Cmd}}", image)
	want := `65532:65532|["CMD","/usr/local/bin/acrelay","healthcheck"]|["/usr/local/bin/acrelay"]|["serve","--addr","0.0.0.0:8080","--data-dir","/var/lib/acrelay","--log-format","json"]`
	if got := strings.TrimSpace(cfg); got != want {
		t.Fatalf("image config:\n got %s\nwant %s", got, want)
	}
	p.canRun(t, image)
	if out, err := p.run("run", "--rm", "--no-healthcheck", "--entrypoint", "/bin/sh", image, "-c", "true"); err == nil {
		t.Fatalf("the image has a shell: %s", out)
	}

	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	op := randomToken()
	// The volume belongs to the image's user: podman (4.3) leaves a new
	// named volume root-owned when the image's directory is empty, and
	// the :U mount option did not change that here.
	p.must(t, "volume", "create", "--opt", "o=uid=65532,gid=65532", "acrelay-data")
	p.must(t, "run", "--detach", "--name", "relay", "--env", "ACRELAY_OPERATOR_TOKEN="+op,
		"--volume", "acrelay-data:/var/lib/acrelay", "--publish", fmt.Sprintf("127.0.0.1:%d:8080", port), image)
	logs := func() string { return p.logs("relay") }
	waitHealthy(t, base, 60*time.Second, logs)

	// user is the name in the image's /etc/passwd, huser the uid on the host
	if got, want := strings.Fields(p.must(t, "top", "relay", "user", "huser", "comm")), []string{"USER", "HUSER", "COMMAND", "acrelay", "65532", "acrelay"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("podman top relay: got %q, want %q", got, want)
	}
	if out, err := p.run("healthcheck", "run", "relay"); err != nil {
		t.Fatalf("podman healthcheck run relay: %v\n%s", err, out)
	}

	posted := postEvent(t, base, op)
	p.must(t, "restart", "--time", "10", "relay")
	waitHealthy(t, base, 60*time.Second, logs)
	readBack(t, base, posted)
	if !strings.Contains(logs(), `"msg":"relay listening"`) {
		t.Fatalf("no JSON log line \"relay listening\" in the container's log:\n%s", logs())
	}
}

// TestImageRecipesAgree: deploy/Dockerfile (multi-stage, for a registry)
// and deploy/Containerfile (built here) take their tree from the same
// script and end in the same instructions, from USER down.
func TestImageRecipesAgree(t *testing.T) {
	root := repoRoot(t)
	tail := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, "deploy", name))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		i := strings.Index(s, "\nUSER ")
		if i < 0 {
			t.Fatalf("deploy/%s: no USER line", name)
		}
		return s[i:]
	}
	if a, b := tail("Dockerfile"), tail("Containerfile"); a != b {
		t.Fatalf("deploy/Dockerfile and deploy/Containerfile differ from USER down:\n%s\n---\n%s", a, b)
	}
	df, err := os.ReadFile(filepath.Join(root, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(df), "\nRUN deploy/image-root.sh /out/root\n") {
		t.Fatal("deploy/Dockerfile's build stage does not run deploy/image-root.sh")
	}
}

// TestImageBinaryReproducible: deploy/image-root.sh run from a copy of the
// source in another directory (as deploy/Dockerfile's build stage runs it
// in /src) writes the same binary, byte for byte, as run from this
// checkout: the two image recipes ship the same bytes given the same Go
// release.
func TestImageBinaryReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds acrelay twice; skipped with -short")
	}
	root := repoRoot(t)
	files, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (the copy needs the checkout's file list)", err)
	}
	src := filepath.Join(t.TempDir(), "src")
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	sum := func(script, out string) string {
		t.Helper()
		if b, err := exec.Command(script, out).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, b)
		}
		b, err := os.ReadFile(filepath.Join(out, "usr", "local", "bin", "acrelay"))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		return hex.EncodeToString(h[:])
	}
	here := sum(filepath.Join(root, "deploy", "image-root.sh"), filepath.Join(t.TempDir(), "a"))
	there := sum(filepath.Join(src, "deploy", "image-root.sh"), filepath.Join(t.TempDir(), "b"))
	if here != there {
		t.Fatalf("image-root.sh binaries differ: %s here, %s from a copy of the source", here, there)
	}
	t.Logf("acrelay sha256 %s from both", here)
}
