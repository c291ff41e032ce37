package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// podman runs Debian's podman on a storage of its own under a temporary
// directory (vfs driver: no overlay mount needed), so a test neither sees
// nor leaves images or containers of anyone else.
type podman struct {
	bin   string
	dir   string   // the test's temporary directory
	flags []string // global flags: storage, runtime
	env   []string // CONTAINERS_CONF when the machine needs one
}

// newPodman skips the test when podman is absent (ACRELAY_PODMAN, else
// podman on PATH), and removes everything it made at cleanup.
func newPodman(t *testing.T) *podman {
	t.Helper()
	bin := os.Getenv("ACRELAY_PODMAN")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("podman"); err != nil {
			t.Skip("podman not installed (scripts/provision_podman.sh installs Debian's podman; ACRELAY_PODMAN names it)")
		}
	}
	// podman refuses a run root of 50 characters or more: t.TempDir()'s
	// are longer, so the directory is made by hand (and removed below).
	parent := os.TempDir()
	if len(parent) > 20 {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "acrelay-podman-")
	if err != nil {
		t.Fatal(err)
	}
	p := &podman{bin: bin, dir: dir, flags: []string{
		"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs",
		"--tmpdir", filepath.Join(dir, "tmp"),
	}}
	t.Cleanup(func() {
		// containers first, then the storage (files of other uids included)
		_, _ = p.run("rm", "--all", "--force", "--time", "2")
		if out, err := p.run("system", "reset", "--force"); err != nil {
			t.Logf("podman system reset: %v\n%s", err, out)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return p
}

// run runs podman with args and returns its standard output; an error
// carries its standard error.
func (p *podman) run(args ...string) (string, error) {
	cmd := exec.Command(p.bin, append(append([]string{}, p.flags...), args...)...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return out.String(), fmt.Errorf("%v: %s", err, strings.TrimSpace(errOut.String()))
		}
		return out.String(), nil
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("podman %s: timed out after 5m", strings.Join(args, " "))
	}
}

// logs is the container's log, standard output and error interleaved as
// podman stored them, or why it could not be read.
func (p *podman) logs(name string) string {
	cmd := exec.Command(p.bin, append(append([]string{}, p.flags...), "logs", name)...)
	cmd.Env = append(os.Environ(), p.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("podman logs %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// must runs podman and fails the test on an error.
func (p *podman) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := p.run(args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// buildImage assembles the image tree with deploy/image-root.sh and builds
// deploy/Containerfile from it as tag (--format docker keeps HEALTHCHECK).
func (p *podman) buildImage(t *testing.T, tag string) {
	t.Helper()
	root := repoRoot(t)
	ctx := filepath.Join(p.dir, "context")
	out, err := exec.Command(filepath.Join(root, "deploy", "image-root.sh"), filepath.Join(ctx, "root")).CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/image-root.sh: %v\n%s", err, out)
	}
	p.must(t, "build", "--format", "docker", "--quiet", "--tag", tag, "--file", filepath.Join(root, "deploy", "Containerfile"), ctx)
}

// canRun makes sure a container of image runs here, trying the machine's
// defaults first and then what some sandboxes need: runc instead of crun
// (crun refuses cgroup v1/v2 hybrid hosts) and default ulimits no higher
// than this process's own (podman's defaults raise RLIMIT_NOFILE and
// RLIMIT_NPROC, which needs CAP_SYS_RESOURCE). It skips the test with
// the exact errors when neither runs.
func (p *podman) canRun(t *testing.T, image string) {
	t.Helper()
	out, err := p.run("run", "--rm", "--no-healthcheck", image, "version")
	if err == nil && strings.HasPrefix(out, "acrelay ") {
		return
	}
	first := fmt.Sprint(err, strings.TrimSpace(out))
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	nofile := min(lim.Cur, 65536)
	conf := filepath.Join(p.dir, "containers.conf")
	body := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=4096:4096\"]\n", nofile, nofile)
	if _, err := exec.LookPath("runc"); err == nil {
		body += "[engine]\nruntime = \"runc\"\n"
	}
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	p.env = []string{"CONTAINERS_CONF=" + conf}
	out, err = p.run("run", "--rm", "--no-healthcheck", image, "version")
	if err == nil && strings.HasPrefix(out, "acrelay ") {
		t.Logf("podman's defaults cannot run a container here (%s); running with %s:\n%s", first, conf, body)
		return
	}
	t.Skipf("podman cannot run containers on this machine: with its defaults: %s; with %q: %v %s", first, body, err, strings.TrimSpace(out))
}
