# Sourced by scripts/provision.sh: builds Miniflux v2.3.5 (Apache-2.0,
# module miniflux.app/v2), a widely used feed reader, into the user cache,
# reused when present, and exports the binary as ACRELAY_MINIFLUX_BIN. The
# relay's feed-reader test (relay TestMinifluxReadsFeeds) runs it on its own
# database of the test PostgreSQL and skips when the variable is unset.
# Miniflux is built with `go install pkg@version`, never required by go.mod.
provision_miniflux() {
  local v=v2.3.5
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/miniflux-$v"
  if [ -x "$dir/miniflux.app" ]; then
    export ACRELAY_MINIFLUX_BIN="$dir/miniflux.app"
    ACRELAY_PROVISION_NOTES+=("Miniflux $v: cached at $dir")
    return
  fi
  echo "== building Miniflux $v (about 60 s cold on 2 cores)"
  mkdir -p "$dir"
  if GOBIN="$dir" CGO_ENABLED=0 go install "miniflux.app/v2@$v" >"$ACRELAY_TMP/miniflux-build.log" 2>&1 &&
      [ -x "$dir/miniflux.app" ]; then
    export ACRELAY_MINIFLUX_BIN="$dir/miniflux.app"
    ACRELAY_PROVISION_NOTES+=("Miniflux $v: built into $dir")
  else
    tail -20 "$ACRELAY_TMP/miniflux-build.log"
    ACRELAY_PROVISION_NOTES+=("Miniflux $v: SKIPPED - go install failed (see output above); the feed-reader test skips")
  fi
}
