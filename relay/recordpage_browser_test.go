package relay_test

import (
	"context"
	"encoding/json"
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

// TestRecordPageBrowser opens a feed entry's record page (under a feed
// capability) in headless Chromium, as a reader clicking "open entry"
// would: the title, author and facts are the record's, every hostile
// string is text (no element, no dialog, no script at all), the
// stylesheet applies under the CSP, the record JSON on the page parses
// to the record, and no request leaves the relay.
func TestRecordPageBrowser(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("no Chromium: install Debian's chromium (scripts/provision_chromium.sh does) or set ACRELAY_CHROMIUM")
	}
	e := newUIEnv(t, "")
	pid, tok := e.newProject("")
	a := e.newAgentNamed(pid, tok, hostileName)
	ev := a.event("repo", "docs", correspondence.KindArtifactOffer, obj("summary", hostileSummary,
		"artifact", obj("kind", "git_patch", "digest", "sha256:"+strings.Repeat("e", 64), "locator", hostileLocator)), nil, hostilePath)
	mustStatus(t, e.post(a, ev), 201)
	r := e.do("POST", "/v1/feeds", tok, []byte(`{"repository_id":"repo"}`))
	mustStatus(t, r, 201)
	feedURL := r.json(t)["url"].(string)
	recordURL := strings.TrimSuffix(feedURL, ".atom?repository_id=repo") + "/records/1"

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1100, 1000))...)
	defer cancelAlloc()
	var mu sync.Mutex
	var dialogs, exceptions []string
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
		}
	}))
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	if err := chromedp.Do(ctx, chromedp.Navigate(recordURL), chromedp.WaitVisible(chromedp.CSS(`article.event h2`)),
		chromedp.Sleep(300*time.Millisecond)); err != nil { // room for a dialog, were one to open
		t.Fatalf("open: %v", err)
	}
	title, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`article.event h2`)))
	if err != nil {
		t.Fatal(err)
	}
	if title != "Artifact: "+hostileSummary {
		t.Errorf("heading %q", title)
	}
	who, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`article.event .who strong`)))
	if err != nil || who != hostileName {
		t.Errorf("author %q (%v), want %q", who, err, hostileName)
	}
	facts, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`dl.facts`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{hostilePath, hostileLocator, ev.ID, "docs"} {
		if !strings.Contains(facts, want) {
			t.Errorf("facts lack %q: %q", want, facts)
		}
	}
	// Nothing from the record became an element; the page has no script
	// at all; the stylesheet (same origin) applied; every link stays on
	// the relay.
	state, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({
		scripts: document.querySelectorAll('script').length,
		imgs: document.querySelectorAll('img, iframe, object, embed, form').length,
		handlers: document.querySelectorAll('[onerror], [onmouseover], [onclick]').length,
		styled: getComputedStyle(document.querySelector('pre.json')).whiteSpace,
		links: Array.from(document.querySelectorAll('a')).map(a => a.href + ' ' + a.rel),
		json: document.querySelector('pre.json').textContent,
		documentTitle: document.title,
		resources: performance.getEntriesByType('resource').map(r => r.name),
	})`))
	if err != nil {
		t.Fatal(err)
	}
	if state["scripts"] != 0.0 || state["imgs"] != 0.0 || state["handlers"] != 0.0 {
		t.Errorf("elements from record text: %v", state)
	}
	if state["styled"] != "pre-wrap" {
		t.Errorf("the stylesheet did not apply: pre.json white-space %v", state["styled"])
	}
	if dt, _ := state["documentTitle"].(string); dt != "Artifact: "+hostileSummary+" · acrelay" {
		t.Errorf("document title %q", dt)
	}
	for _, l := range state["links"].([]any) {
		if s := l.(string); !strings.HasPrefix(s, e.url+"/") || !strings.HasSuffix(s, " noreferrer") {
			t.Errorf("link %q leaves the relay or sends a referrer", s)
		}
	}
	for _, res := range state["resources"].([]any) {
		if !strings.HasPrefix(res.(string), e.url+"/") {
			t.Errorf("resource %q is not the relay's", res)
		}
	}
	var rec struct {
		Event struct {
			EventID string `json:"event_id"`
		} `json:"event"`
	}
	if err := json.Unmarshal([]byte(state["json"].(string)), &rec); err != nil || rec.Event.EventID != ev.ID {
		t.Errorf("the page's record JSON: %v, event_id %q", err, rec.Event.EventID)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactsDir(t), "record-page.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	mu.Lock()
	defer mu.Unlock()
	if len(dialogs) > 0 || len(exceptions) > 0 {
		t.Errorf("dialogs %q, exceptions %q", dialogs, exceptions)
	}
}
