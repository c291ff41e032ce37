package relay_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/acrelay/acrelay/correspondence"
)

// chromiumPath is Debian's Chromium (scripts/provision_chromium.sh exports
// ACRELAY_CHROMIUM), or "" when there is none.
func chromiumPath() string {
	for _, p := range []string{os.Getenv("ACRELAY_CHROMIUM"), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

// artifactsDir is $ACRELAY_TEST_ARTIFACTS when set, else a temporary
// directory of the test.
func artifactsDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("ACRELAY_TEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestUIBrowser drives headless Chromium through the live web view: sign
// in through the form, see a claim, see an event posted over HTTP appear
// without a reload, and see hostile event text rendered as text, with no
// element and no dialog created from it.
func TestUIBrowser(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("no Chromium: install Debian's chromium (scripts/provision_chromium.sh does) or set ACRELAY_CHROMIUM")
	}
	e := newUIEnv(t, "")
	pid, tok := e.newProject("")
	alice, bob := e.newAgent(pid, tok), e.newAgent(pid, tok)
	const repo = "acrelay"
	open := alice.claim(repo, "docs", newUUID(), 1, "", time.Now().Add(47*time.Minute), "docs/api", "README.md")
	mustStatus(t, e.post(alice, open), 201)
	mustStatus(t, e.post(bob, bob.claim(repo, "docs", newUUID(), 1, "", time.Now().Add(12*time.Minute), "docs")), 201)
	mustStatus(t, e.post(alice, alice.event(repo, "docs", correspondence.KindProgress, obj("summary", "API reference regenerated; examples next"), nil, "docs/api")), 201)
	mustStatus(t, e.post(bob, bob.event(repo, "docs", correspondence.KindArtifactOffer,
		obj("artifact", obj("kind", "git_commit", "revision", "4f1c2a9e8b7d6c5a4f3e2d1c0b9a8f7e6d5c4b3a"), "summary", "docs index rebuilt"), nil, "docs")), 201)
	readTok := e.newToken(pid, "read")

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))...)
	defer cancelAlloc()
	var mu sync.Mutex
	var dialogs, exceptions []string
	navigations := 0
	var ctx context.Context
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			dialogs = append(dialogs, ev.Message)
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		case *runtime.EventExceptionThrown:
			exceptions = append(exceptions, ev.ExceptionDetails.Text)
		case *page.EventFrameNavigated:
			navigations++
		}
	}))
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	// Unauthenticated, the page sends the browser to the sign-in form.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.url+"/ui/projects/"+pid+"?repository_id="+repo),
		chromedp.WaitVisible(chromedp.ID("token")),
	); err != nil {
		t.Fatalf("open: %v", err)
	}
	signinURL, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(signinURL, "/ui/signin?repository_id="+repo) {
		t.Errorf("sign-in URL %q", signinURL)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token"), readTok),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS(`#claims tr.claim`)),
		chromedp.WaitVisible(chromedp.CSS(`#live-status.live`)), // the live stream is open
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	pageURL, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(pageURL, readTok) || !strings.HasSuffix(pageURL, "/ui/projects/"+pid+"?repository_id="+repo) {
		t.Errorf("page URL %q", pageURL)
	}
	claimsText, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#claims`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"docs/api", "README.md", "in 46m"} {
		if !strings.Contains(claimsText, want) {
			t.Errorf("claims section lacks %q: %q", want, claimsText)
		}
	}
	mu.Lock()
	before := navigations
	mu.Unlock()

	// An event posted over HTTP appears within 2 s, without a reload.
	hostile := `<script>alert(1)</script>"><img src=x onerror=alert(1)>`
	mustStatus(t, e.post(bob, bob.intent(repo, hostile)), 201)
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	err = chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(`li.event[data-received-seq="5"]`)))
	wcancel()
	if err != nil {
		t.Fatalf("the posted event did not appear within 2s: %v", err)
	}
	// The live list may be re-rendered by a later frame between the wait
	// and the read (the node read is then a detached one): read again
	// for a moment before judging the text.
	var summary string
	for deadline := time.Now().Add(2 * time.Second); ; {
		summary, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`li.event[data-received-seq="5"] .summary`)))
		if err != nil {
			t.Fatal(err)
		}
		if summary == hostile || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if summary != hostile {
		t.Errorf("summary text %q, want %q", summary, hostile)
	}
	if err := chromedp.Do(ctx, chromedp.Sleep(300*time.Millisecond)); err != nil { // room for a dialog, were one to open
		t.Fatal(err)
	}
	counts, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.querySelectorAll('img').length, document.querySelectorAll('script').length, document.querySelectorAll('[onerror]').length]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 3 || counts[0] != 0 || counts[1] != 1 || counts[2] != 0 {
		t.Errorf("elements from event text: [img script [onerror]] = %v, want [0 1 0] (the one script is ui.js)", counts)
	}
	mu.Lock()
	if navigations != before {
		t.Errorf("the page navigated (%d → %d): not a live update", before, navigations)
	}
	mu.Unlock()

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactsDir(t), "ui.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	mu.Lock()
	defer mu.Unlock()
	if len(dialogs) > 0 {
		t.Errorf("JavaScript dialogs opened: %q", dialogs)
	}
	if len(exceptions) > 0 {
		t.Errorf("JavaScript exceptions: %q", exceptions)
	}
}
