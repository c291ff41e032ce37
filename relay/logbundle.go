package relay

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// acceptsGzip reports whether the request's Accept-Encoding fields
// (RFC 9110 §12.5.3) accept gzip: "gzip" (or "x-gzip") with a non-zero
// weight, or "*" with a non-zero weight when gzip is not named. A weight
// that does not parse counts as 1, as most servers read it; no field
// means identity only (the representation we would otherwise send).
func acceptsGzip(r *http.Request) bool {
	star, named := false, false
	for _, field := range r.Header.Values("Accept-Encoding") {
		for item := range strings.SplitSeq(field, ",") {
			name, params, _ := strings.Cut(item, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			ok := weightNonZero(params)
			switch name {
			case "gzip", "x-gzip":
				if !ok {
					return false
				}
				named = true
			case "*":
				star = ok
			}
		}
	}
	return named || star
}

// weightNonZero reads "q=…" among ";"-separated parameters: false only for
// a weight that is zero (0, 0.0, 0.00, 0.000).
func weightNonZero(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return err != nil || q > 0
	}
	return true
}

// gzipCacheSize bounds the compressed bundles kept (about 40 KiB for a
// full bundle of 1.7 KiB records: about 10 MiB).
const gzipCacheSize = 256

// bundleKey names an entry bundle at one width and the digest of its
// bytes: a bundle is rebuilt from the records at each read and the cache
// only saves the compression, so a record changed behind the relay's back
// (which an audit must see) is never served from the cache.
type bundleKey struct {
	projectID string
	n         int64
	w         int
	digest    [sha256.Size]byte
}

// gzipCache keeps recently compressed bundles. Eviction is of an
// arbitrary entry when full.
type gzipCache struct {
	mu sync.Mutex
	m  map[bundleKey][]byte
}

// gzipBundle returns body, the entry bundle t of projectID, gzipped
// (default level: a 439 KB bundle of JSON records is about 40 KB), from
// the cache when it was compressed before.
func (s *Server) gzipBundle(projectID string, t tlog.Tile, body []byte) ([]byte, error) {
	k := bundleKey{projectID, t.N, t.W, sha256.Sum256(body)}
	c := &s.gzips
	c.mu.Lock()
	gz, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return gz, nil
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(body); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	gz = b.Bytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[bundleKey][]byte, gzipCacheSize)
	}
	for x := range c.m {
		if len(c.m) < gzipCacheSize {
			break
		}
		delete(c.m, x)
	}
	c.m[k] = gz
	return gz, nil
}
