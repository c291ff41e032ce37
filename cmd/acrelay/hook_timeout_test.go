package main

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
)

// silentRelay listens on loopback, accepts every connection and never
// answers (nor closes it before the test ends); it returns the URL.
func silentRelay(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// TestInboxHookSilentRelay: in a hook, a relay that accepts the
// connection and never answers is given --timeout (4s by default in a
// hook) and the output says it did not answer in time; exit status 0.
// Without --hook the same is an error naming the timeout.
func TestInboxHookSilentRelay(t *testing.T) {
	newAgentRepo(t)
	t.Setenv("ACRELAY_URL", silentRelay(t))
	out, _, err := runAgent(t, newInboxCmd(), "", "--hook", "claude-code", "--timeout", "300ms")
	if err != nil || out != "acrelay inbox: no news read: the relay did not answer within 300ms (--timeout)\n" {
		t.Fatalf("hook: %v %q", err, out)
	}
	out, _, err = runAgent(t, newInboxCmd(), `{"hook_event_name":"UserPromptSubmit"}`, "--hook", "codex", "--timeout", "300ms")
	if err != nil || out != `{"hookSpecificOutput":{"additionalContext":"acrelay inbox: no news read: the relay did not answer within 300ms (--timeout)\n","hookEventName":"UserPromptSubmit"}}`+"\n" {
		t.Fatalf("codex hook: %v %q", err, out)
	}
	_, _, err = runAgent(t, newInboxCmd(), "", "--timeout", "300ms")
	if err == nil || err.Error() != "the relay did not answer within 300ms (--timeout)" {
		t.Fatalf("without --hook: %v", err)
	}
	// A hook's default deadline is the short one (not the 15s of a run by hand).
	out, _, err = runAgent(t, newInboxCmd(), "", "--hook", "claude-code")
	if err != nil || out != "acrelay inbox: no news read: the relay did not answer within 4s (--timeout)\n" {
		t.Fatalf("hook, default timeout: %v %q", err, out)
	}
}

// TestGuardSilentRelay: a relay that accepts the connection and never
// answers never blocks a commit, even with --strict: past --timeout (4s
// by default) the guard says the relay did not answer in time, exit 0.
func TestGuardSilentRelay(t *testing.T) {
	r := newAgentRepo(t)
	r.write(t, "src/parser/lexer.go", "package parser\n")
	git(t, r.dir, "add", ".")
	t.Setenv("ACRELAY_URL", silentRelay(t))
	out, errOut, err := runAgent(t, newGuardCheckCmd(), "", "--staged", "--hook", "pre-commit", "--strict", "--timeout", "300ms")
	if err != nil || out != "" || errOut != "acrelay guard: the relay did not answer within 300ms (--timeout); commit not checked\n" {
		t.Fatalf("hook: %v %q %q", err, out, errOut)
	}
	out, _, err = runAgent(t, newGuardCheckCmd(), "", "--paths", "src/parser", "--timeout", "300ms")
	var ee *exitError
	if errors.As(err, &ee) || err != nil || !strings.HasSuffix(out, "the relay did not answer within 300ms (--timeout); paths not checked\n") {
		t.Fatalf("--paths: %v %q", err, out)
	}
	_, errOut, err = runAgent(t, newGuardCheckCmd(), "", "--staged", "--hook", "pre-commit")
	if err != nil || errOut != "acrelay guard: the relay did not answer within 4s (--timeout); commit not checked\n" {
		t.Fatalf("hook, default timeout: %v %q", err, errOut)
	}
}
