package relay_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestHomeBrowser opens / in headless Chromium as a person would: the
// front page renders with its stylesheet, loads nothing from another
// origin, raises no error, and its sign-in link leads to the web view's
// form.
func TestHomeBrowser(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("no Chromium: install Debian's chromium (scripts/provision_chromium.sh does) or set ACRELAY_CHROMIUM")
	}
	e := newUIEnv(t, "")
	origin, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1024, 800))...)
	defer cancelAlloc()
	var mu sync.Mutex
	var requests, problems []string
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			requests = append(requests, ev.Request.URL)
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				problems = append(problems, "console error")
			}
		case *cdplog.EventEntryAdded: // a CSP violation is logged here
			if ev.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		}
	}))
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.url+"/"),
		chromedp.WaitVisible(chromedp.ID("signin")),
	); err != nil {
		t.Fatalf("open /: %v", err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	heading, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1")))
	if err != nil {
		t.Fatal(err)
	}
	sheets, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.styleSheets].filter(s => s.cssRules.length > 0).length`))
	if err != nil {
		t.Fatal(err)
	}
	if title != "A relay for agent correspondence · acrelay" {
		t.Errorf("title %q", title)
	}
	if heading != "acrelay agent-correspondence relay" {
		t.Errorf("h1 %q", heading)
	}
	if sheets != 1 {
		t.Errorf("%d stylesheets applied, want 1 (the web view's, allowed by its CSP)", sheets)
	}

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("token")),
	); err != nil {
		t.Fatalf("follow the sign-in link: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if loc != e.url+"/ui/signin" {
		t.Errorf("sign-in link led to %q", loc)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(requests) < 3 {
		t.Errorf("requests seen %q: want at least the page, its stylesheet and the sign-in form", requests)
	}
	for _, u := range requests {
		if p, err := url.Parse(u); err != nil || p.Host != origin.Host || !strings.HasPrefix(u, "http://") {
			t.Errorf("request to another origin: %q", u)
		}
	}
	if len(problems) > 0 {
		t.Errorf("the page raised %q", problems)
	}
}
