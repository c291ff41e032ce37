package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
)

func init() { rootCmd.AddCommand(newSubscribeCmd()) }

// subscribeConfig is what runSubscribe needs, validated by the command.
type subscribeConfig struct {
	Topic          string
	Hub            string // "" discovers it from the topic's Link rel="hub"
	PublicCallback string
	Token          string
	Keys           client.Keyring
	Lease          time.Duration // 0: the hub's default
	NoSecret       bool
	VerifyTimeout  time.Duration
	HTTP           *http.Client
	// VerifyLog checks each delivered record's inclusion in the log, with
	// LogKey ("" trusts the relay's /v1/log-key).
	VerifyLog bool
	LogKey    string
}

func newSubscribeCmd() *cobra.Command {
	var rf relayFlags
	var cfg subscribeConfig
	var listen string
	cmd := &cobra.Command{
		Use:   "subscribe",
		Short: "Subscribe to a topic over WebSub, printing delivered records as JSON lines",
		Long: `subscribe follows a WebSub topic of the relay
({public}/v1/correspondence/events.atom|.json?project_id=P&repository_id=R[&thread_id=T]).
It serves the callback on --callback-listen, asks the hub to subscribe
--public-callback (the URL at which the hub reaches that listener; the
listener answers on its path only), waits for the hub's verification of
intent, and prints each new record once, as one JSON line, in delivery order.

Deliveries are authenticated with a secret that subscribe generates
(X-Hub-Signature, HMAC-SHA256): unsigned or badly signed ones are dropped.
With --keyring each event's signature and event id are verified too, and
entries that fail are dropped. A hub.mode=denied ends the command; since
WebSub does not authenticate denials, give --public-callback a path
nobody can guess. The hub comes from the topic's
Link rel="hub" (a GET of the topic with the token) unless --hub is given.

The lease is renewed at 80% of what the hub granted; Ctrl-C or SIGTERM
unsubscribes. subscribe fails when the hub refuses, denies the
subscription, or does not verify within --verify-timeout.

Private topics need a token with the read scope; public topics need none
(and --no-secret lets their deliveries come unsigned).

With --verify-log each delivered record is checked against the project's
verifiable log before it is printed (inclusion at a checkpoint signed by
the log key, fetched from the topic's relay); a record that fails ends
subscribe with exit status 1.`,
		Example: `  acrelay subscribe --keyring keys.json \
    --topic 'https://relay.example/v1/correspondence/events.atom?project_id=1111…&repository_id=repo%3Aexample%2Fapp' \
    --callback-listen 127.0.0.1:9090 --public-callback https://agent.example/websub/9f2c41d7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Topic == "" || listen == "" || cfg.PublicCallback == "" {
				return errors.New("--topic, --callback-listen and --public-callback are required")
			}
			for name, v := range map[string]string{"--topic": cfg.Topic, "--public-callback": cfg.PublicCallback, "--hub": cfg.Hub} {
				if v == "" {
					continue
				}
				if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return fmt.Errorf("%s %q: want an absolute http(s) URL", name, v)
				}
			}
			var err error
			if cfg.Token, err = optionalToken(&rf); err != nil {
				return err
			}
			if rf.keyring != "" {
				if cfg.Keys, err = client.LoadKeyring(rf.keyring); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(cmd.ErrOrStderr(), "acrelay: note: no --keyring, records are not verified")
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("callback listen: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runSubscribe(ctx, ln, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Topic, "topic", "", "topic URL (required)")
	fs.StringVar(&listen, "callback-listen", "", "address the callback listens on, e.g. 127.0.0.1:9090 (required)")
	fs.StringVar(&cfg.PublicCallback, "public-callback", "", "callback URL the hub can reach, sent as hub.callback (required); prefer an unguessable path")
	fs.StringVar(&cfg.Hub, "hub", "", "hub URL (default: the topic's Link rel=\"hub\")")
	fs.DurationVar(&cfg.Lease, "lease", 0, "lease to ask for, e.g. 24h (default: the hub's)")
	fs.DurationVar(&cfg.VerifyTimeout, "verify-timeout", time.Minute, "how long to wait for the hub's verification of intent")
	addVerifyLogFlags(cmd, &cfg.VerifyLog, &cfg.LogKey)
	fs.BoolVar(&cfg.NoSecret, "no-secret", false, "send no hub.secret and accept unsigned deliveries (public topics only)")
	fs.StringVar(&rf.token, "token", "", "bearer token with the read scope, for private topics (env ACRELAY_TOKEN; prefer the env or --token-file over the command line)")
	fs.StringVar(&rf.tokenFile, "token-file", "", "file holding the bearer token; wins over ACRELAY_TOKEN (env ACRELAY_TOKEN_FILE)")
	fs.StringVar(&rf.keyring, "keyring", envOr("ACRELAY_KEYRING", ""),
		`JSON file [{"signing_key_id","identity_id","public_key_b64url"}] to verify every record delivered (env ACRELAY_KEYRING)`)
	return cmd
}

// optionalToken is resolveToken for commands that also work without a
// token (public topics).
func optionalToken(rf *relayFlags) (string, error) {
	if rf.token == "" && rf.tokenFile == "" && os.Getenv("ACRELAY_TOKEN") == "" && os.Getenv("ACRELAY_TOKEN_FILE") == "" {
		return "", nil
	}
	return rf.resolveToken()
}

// errStopping is the cause when runSubscribe itself ends its context.
var errStopping = errors.New("stopping")

// runSubscribe serves the callback on ln, subscribes, prints records on
// stdout until ctx ends, renewing the lease on the way, then unsubscribes.
// Errors: a refusal or denial by the hub, no verification within
// cfg.VerifyTimeout, a lease that could not be renewed before it ended,
// or a failed write to stdout.
func runSubscribe(ctx context.Context, ln net.Listener, cfg subscribeConfig, stdout, stderr io.Writer) error {
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.VerifyTimeout <= 0 {
		cfg.VerifyTimeout = time.Minute
	}
	cb, err := url.Parse(cfg.PublicCallback)
	if err != nil {
		ln.Close()
		return fmt.Errorf("--public-callback: %w", err)
	}
	if cfg.Hub == "" {
		if cfg.Hub, err = discoverHub(ctx, hc, cfg.Topic, cfg.Token); err != nil {
			ln.Close()
			return err
		}
	}
	run, cancel := context.WithCancelCause(ctx)
	defer cancel(errStopping)
	var outMu sync.Mutex
	var ic *client.InclusionChecker
	if cfg.VerifyLog {
		base, _, _ := strings.Cut(cfg.Topic, "/v1/")
		lc, err := client.New(base, cfg.Token)
		if err == nil {
			lc.HTTP = hc
			ic, err = inclusionChecker(ctx, lc, cfg.LogKey, stderr)
		}
		if err != nil {
			ln.Close()
			return err
		}
	}
	sub := &client.WebSubSubscriber{Hub: cfg.Hub, Callback: cfg.PublicCallback, HTTP: hc, Token: cfg.Token,
		NoSecret: cfg.NoSecret, Keys: cfg.Keys,
		OnRecord: func(_ string, rec client.Record) {
			outMu.Lock()
			defer outMu.Unlock()
			if ic != nil && run.Err() == nil {
				if err := ic.Check(run, rec); err != nil {
					cancel(&exitError{code: 1, err: fmt.Errorf("--verify-log: %w", err)})
					return
				}
			}
			if err := writeJSONLine(stdout, rec); err != nil {
				cancel(fmt.Errorf("write record: %w", err))
			}
		},
		OnDenied: func(_, reason string) {
			cancel(fmt.Errorf("%w: %q", client.ErrWebSubDenied, reason))
		}}

	path := cb.Path
	if path == "" {
		path = "/"
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != path {
				http.NotFound(w, r)
				return
			}
			sub.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		if st := sub.Stats(); st.Dropped() > 0 || st.Refused > 0 {
			fmt.Fprintf(stderr, "acrelay: dropped %d deliveries (%d bad signature, %d unknown topic, %d malformed, %d too large) and refused %d entries\n",
				st.Dropped(), st.BadSignature, st.UnknownTopic, st.Malformed, st.TooLarge, st.Refused)
		}
	}()
	go func() {
		if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			cancel(fmt.Errorf("callback server: %w", err))
		}
	}()

	lease, err := subscribeOnce(run, sub, cfg)
	if err != nil {
		return stopped(run, err)
	}
	fmt.Fprintf(stderr, "acrelay: subscribed to %s (lease %s)\n", cfg.Topic, lease)
	verifiedAt := time.Now()
	renewAt := verifiedAt.Add(lease * 8 / 10)
	for {
		t := time.NewTimer(time.Until(renewAt))
		select {
		case <-run.Done():
			t.Stop()
			if cause := context.Cause(run); !errors.Is(cause, context.Canceled) && !errors.Is(cause, errStopping) {
				if errors.Is(cause, client.ErrWebSubDenied) {
					return cause // the hub ended it: nothing to unsubscribe
				}
				unsubscribe(sub, cfg, stderr)
				return cause
			}
			unsubscribe(sub, cfg, stderr)
			return nil
		case <-t.C:
		}
		granted, err := subscribeOnce(run, sub, cfg)
		if err == nil {
			verifiedAt, lease = time.Now(), granted
			renewAt = verifiedAt.Add(lease * 8 / 10)
			fmt.Fprintf(stderr, "acrelay: lease renewed (%s)\n", lease)
			continue
		}
		if run.Err() != nil {
			continue // the loop's select reports why
		}
		end := verifiedAt.Add(lease)
		if errors.Is(err, client.ErrWebSubDenied) || time.Now().After(end) {
			return fmt.Errorf("renew the lease: %w", err)
		}
		fmt.Fprintln(stderr, "acrelay: renewing the lease failed, retrying:", errorText(err))
		renewAt = time.Now().Add(max(time.Until(end)/4, time.Second))
	}
}

// subscribeOnce sends the subscription request and waits for the hub's
// verification of intent; the lease is the hub's grant, or what was asked
// when the hub named none.
func subscribeOnce(ctx context.Context, sub *client.WebSubSubscriber, cfg subscribeConfig) (time.Duration, error) {
	if err := sub.Subscribe(ctx, cfg.Topic, cfg.Lease); err != nil {
		return 0, fmt.Errorf("subscribe: %w", err)
	}
	wctx, cancel := context.WithTimeoutCause(ctx, cfg.VerifyTimeout, errNoVerification)
	defer cancel()
	lease, err := sub.Wait(wctx, cfg.Topic)
	if errors.Is(err, errNoVerification) {
		return 0, fmt.Errorf("no verification of intent from the hub within %s: can the hub reach --public-callback %s, and does it lead to --callback-listen?",
			cfg.VerifyTimeout, cfg.PublicCallback)
	}
	if err != nil {
		return 0, err
	}
	if lease <= 0 {
		lease = cfg.Lease
	}
	if lease <= 0 {
		lease = 10 * 24 * time.Hour // the relay's default (spec/websub.md "Leases")
	}
	return lease, nil
}

var errNoVerification = errors.New("no verification of intent")

// stopped returns err, or nil when it is only the interruption of run.
func stopped(run context.Context, err error) error {
	if run.Err() != nil {
		if cause := context.Cause(run); errors.Is(cause, context.Canceled) || errors.Is(cause, errStopping) {
			return nil
		}
		return context.Cause(run)
	}
	return err
}

// unsubscribe asks the hub to end the subscription and waits a little
// for its verification; the callback is still served meanwhile. A
// failure is reported, not fatal: the lease ends on its own.
func unsubscribe(sub *client.WebSubSubscriber, cfg subscribeConfig, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := sub.Unsubscribe(ctx, cfg.Topic)
	if err == nil {
		_, err = sub.Wait(ctx, cfg.Topic)
	}
	if err != nil {
		fmt.Fprintln(stderr, "acrelay: unsubscribe not confirmed (the lease ends on its own):", errorText(err))
		return
	}
	fmt.Fprintln(stderr, "acrelay: unsubscribed")
}

// discoverHub finds the topic's hub: GET the topic (with the token) and
// read its Link rel="hub" (W3C WebSub #discovery).
func discoverHub(ctx context.Context, hc *http.Client, topic, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, topic, nil)
	if err != nil {
		return "", fmt.Errorf("topic: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("discover the hub: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return "", fmt.Errorf("discover the hub: GET topic: %w", client.ParseAPIError(res.StatusCode, body))
	}
	links, err := client.ParseLinks(res.Header, res.Request.URL)
	if err != nil {
		return "", fmt.Errorf("discover the hub: %w", err)
	}
	h, err := links.Get("hub", "")
	if err != nil {
		return "", fmt.Errorf("discover the hub: the topic has %w (pass --hub)", err)
	}
	return h, nil
}
