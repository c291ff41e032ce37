package ingest

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// MaxEventBytes is the largest event, in bytes of its raw JSON, that is
// accepted (spec §3). The relay refuses a larger POST body with 413
// body_too_large before reading it all; Append refuses one for callers that
// have no body limit of their own (a Matrix submission, a peer's record).
const MaxEventBytes = 65536

// DefaultKeyCacheSize is the number of signing keys whose immutable facts
// an Ingester caches when Options.KeyCacheSize is 0.
const DefaultKeyCacheSize = 1 << 16

// Errors of Append. The correspondence, canonicaljson and store errors
// listed in the package documentation are passed through, wrapped.
var (
	// ErrEventTooLarge: the raw event exceeds MaxEventBytes (spec §3).
	ErrEventTooLarge = errors.New("event exceeds 65536 bytes")
	// ErrProjectMismatch: the event's project_id is not the project the
	// caller speaks for (spec §3, §10).
	ErrProjectMismatch = errors.New("event project_id is not the caller's project")
	// ErrSenderNotActive is store.ErrSenderNotActive: the signing key is
	// unknown in the project, belongs to another identity, or it or its
	// identity is not active (spec §3, §6). The same value is returned
	// whether the check failed before the transaction (unknown key) or
	// inside it (a revoked key), so one errors.Is covers both.
	ErrSenderNotActive = store.ErrSenderNotActive
	// ErrAppendUnavailable: the log cannot accept events right now (the
	// store is unavailable, or ctx ended during the append). The event may
	// or may not be stored; retrying the same bytes is safe (spec §7).
	ErrAppendUnavailable = errors.New("append unavailable")
)

// Store is what an Ingester needs: the signing keys of the registry and
// the append of the event log. store.Store satisfies it.
type Store interface {
	// GetKey returns a signing key of a project (any status). Errors:
	// store.ErrNotFound, store.ErrUnavailable.
	GetKey(ctx context.Context, projectID, id string) (store.SigningKey, error)
	// Append is store.Log.Append.
	Append(ctx context.Context, ev *correspondence.Event, canonical []byte) (store.AppendResult, error)
}

var _ Store = store.Store(nil)

// Options tune an Ingester. The zero value is the default.
type Options struct {
	// KeyCacheSize bounds the key cache (entries); 0 means
	// DefaultKeyCacheSize. When full, the least recently used key is
	// evicted.
	KeyCacheSize int
}

// Ingester appends untrusted events to the log. It is safe for concurrent
// use and starts no goroutines.
type Ingester struct {
	st   Store
	keys keyCache
}

// New returns an Ingester over st.
func New(st Store, opts Options) *Ingester {
	n := opts.KeyCacheSize
	if n <= 0 {
		n = DefaultKeyCacheSize
	}
	return &Ingester{st: st, keys: keyCache{max: n}}
}

// Result is the outcome of Append: the store's answer (the stored record
// with its receipt, Created false for an exact retry, the warnings of spec
// §9) and the parsed event (its repository and thread ids, for example).
type Result struct {
	store.AppendResult
	Event *correspondence.Event
}

// Append checks raw, an untrusted event, for the project projectID and
// stores it (spec §3, §6, §7), in the order and with the errors given in
// the package documentation. An exact retry of a stored event returns the
// original record with Created false.
func (in *Ingester) Append(ctx context.Context, projectID string, raw []byte) (Result, error) {
	return in.append(ctx, projectID, raw, func(ev *correspondence.Event, canonical []byte) (store.AppendResult, error) {
		return in.st.Append(ctx, ev, canonical)
	})
}

func (in *Ingester) append(ctx context.Context, projectID string, raw []byte,
	appendFn func(ev *correspondence.Event, canonical []byte) (store.AppendResult, error)) (Result, error) {
	ev, canonical, err := in.prepare(ctx, projectID, raw)
	if err != nil {
		return Result{}, err
	}
	res, err := appendFn(ev, canonical)
	if err != nil {
		return Result{}, appendErr(ctx, ev, err)
	}
	return Result{AppendResult: res, Event: ev}, nil
}

// prepare runs every check before the store's: size, strict parse,
// project, sender key and signature; it returns the event and its
// canonical bytes.
func (in *Ingester) prepare(ctx context.Context, projectID string, raw []byte) (*correspondence.Event, []byte, error) {
	if len(raw) > MaxEventBytes {
		return nil, nil, ErrEventTooLarge
	}
	ev, err := correspondence.ParseEvent(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("parse event: %w", err)
	}
	if ev.ProjectID != projectID {
		return nil, nil, ErrProjectMismatch
	}
	canonical, err := in.verifySender(ctx, ev)
	if err != nil {
		return nil, nil, err
	}
	return ev, canonical, nil
}

// appendErr wraps the store's error of appending ev.
func appendErr(ctx context.Context, ev *correspondence.Event, err error) error {
	if errors.Is(err, store.ErrUnavailable) || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
		return fmt.Errorf("append %s: %w: %w", ev.ID, ErrAppendUnavailable, err)
	}
	return fmt.Errorf("append %s: %w", ev.ID, err)
}

// ForeignStore is what AppendForeign needs beyond Store: the append of a
// page of foreign records under the key-at-time rule. store.Store
// satisfies it.
type ForeignStore interface {
	// AppendPageAt is store.Federation.AppendPageAt.
	AppendPageAt(ctx context.Context, page []store.ForeignAppend) []store.AppendOutcome
}

var _ ForeignStore = store.Store(nil)

// ErrForeignUnsupported: the Ingester's store cannot append foreign
// records (it is not a ForeignStore).
var ErrForeignUnsupported = errors.New("store cannot append foreign records")

// ErrSenderUnknown is ErrSenderNotActive for a record whose signing key is
// not known here at all (errors.Is matches both): a refusal that may pass
// once the key is imported, unlike a key known to have stopped being
// active (spec/federation.md "Trust").
var ErrSenderUnknown = fmt.Errorf("signing key unknown here: %w", ErrSenderNotActive)

// ForeignRecord is one record a federation peer served: the event's raw
// bytes and the remote's receipt time of it.
type ForeignRecord struct {
	Raw              []byte
	RemoteReceivedAt time.Time
}

// ForeignResult is one record's verdict of AppendForeign: its Result, or
// the error Append would have returned (Err).
type ForeignResult struct {
	Result
	Err error
}

// AppendForeign is Append for a page of records a federation peer served
// (spec/federation.md), in the remote's receipt order: the same checks in
// the same order for each record, except that the sender identity and key
// need only have been active at its RemoteReceivedAt, as the imported
// registry's change times show ("Revoked keys"). The checks before the
// store run on up to GOMAXPROCS goroutines (ended before it returns);
// then every record that passed them is appended in page order in one
// group commit (store.Federation.AppendPageAt). Each record gets this
// relay's own receipt (RemoteReceivedAt is never stored) and its own
// verdict, one per record in page order: errors as Append's (an unknown
// key is ErrSenderUnknown), and ErrForeignUnsupported.
func (in *Ingester) AppendForeign(ctx context.Context, projectID string, page []ForeignRecord) []ForeignResult {
	out := make([]ForeignResult, len(page))
	fs, ok := in.st.(ForeignStore)
	if !ok {
		for i := range out {
			out[i].Err = ErrForeignUnsupported
		}
		return out
	}
	apps := make([]store.ForeignAppend, len(page))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(page)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(page) {
					return
				}
				ev, canonical, err := in.prepare(ctx, projectID, page[i].Raw)
				out[i].Event, out[i].Err = ev, err
				apps[i] = store.ForeignAppend{Event: ev, Canonical: canonical, At: page[i].RemoteReceivedAt}
			}
		})
	}
	wg.Wait()
	ready := make([]store.ForeignAppend, 0, len(page))
	idx := make([]int, 0, len(page))
	for i := range page {
		if out[i].Err == nil {
			ready = append(ready, apps[i])
			idx = append(idx, i)
		}
	}
	if len(ready) == 0 {
		return out
	}
	for k, o := range fs.AppendPageAt(ctx, ready) {
		i := idx[k]
		if o.Err != nil {
			out[i].Err = appendErr(ctx, out[i].Event, o.Err)
			continue
		}
		out[i].AppendResult = o.Result
	}
	return out
}

// verifySender checks that the signing key belongs to the sender identity
// in the event's project and that the signature and event id verify (spec
// §6). Whether the key and identity are still active is decided inside the
// append transaction (store.ErrSenderNotActive), so revocation takes effect
// on the very next append; here only a key's immutable facts are needed,
// and they are cached. It returns the event's RFC 8785 bytes (event_id
// included), built from the canonicalization that verification needs
// (correspondence.Event.VerifyCanonical): an event is canonicalized once.
func (in *Ingester) verifySender(ctx context.Context, ev *correspondence.Event) ([]byte, error) {
	key, err := in.keys.get(ctx, in.st, ev.ProjectID, ev.Sender.SigningKeyID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("signing key %s: %w", ev.Sender.SigningKeyID, ErrSenderUnknown)
		}
		return nil, fmt.Errorf("signing key %s: %w", ev.Sender.SigningKeyID, err)
	}
	if key.projectID != ev.ProjectID || key.identityID != ev.Sender.IdentityID {
		return nil, fmt.Errorf("signing key %s of another identity: %w", ev.Sender.SigningKeyID, ErrSenderNotActive)
	}
	canonical, err := ev.VerifyCanonical(key.pub)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", ev.ID, err)
	}
	return canonical, nil
}

// keyFacts are the immutable facts of a signing key: a key id never
// changes project, identity or public key (only its status changes).
type keyFacts struct {
	projectID, identityID string
	pub                   ed25519.PublicKey
}

// keyCache caches keyFacts by (project, signing key id), at most max,
// least recently used evicted first.
type keyCache struct {
	max  int
	once sync.Once
	lru  *lru.Cache[keyCacheKey, keyFacts]
}

type keyCacheKey struct{ projectID, keyID string }

func (c *keyCache) get(ctx context.Context, st Store, projectID, id string) (keyFacts, error) {
	c.once.Do(func() { c.lru, _ = lru.New[keyCacheKey, keyFacts](max(c.max, 1)) })
	cacheKey := keyCacheKey{projectID, id}
	if f, ok := c.lru.Get(cacheKey); ok {
		return f, nil
	}
	k, err := st.GetKey(ctx, projectID, id)
	if err != nil {
		return keyFacts{}, err
	}
	pub, err := correspondence.DecodePublicKey(k.PublicKey)
	if err != nil {
		return keyFacts{}, store.ErrNotFound // a stored key that cannot verify anything
	}
	f := keyFacts{projectID: k.ProjectID, identityID: k.IdentityID, pub: pub}
	c.lru.Add(cacheKey, f)
	return f, nil
}
