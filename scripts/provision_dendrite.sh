# Sourced by scripts/provision.sh: builds Dendrite v0.13.8 (Apache-2.0,
# module github.com/matrix-org/dendrite) for the Matrix courier's tests
# into the user cache, reused when present, and exports its directory as
# ACRELAY_DENDRITE_BIN. The Go tests start Dendrite themselves
# (internal/dendritetest) and skip when the binaries are absent. Dendrite
# is built with `go install pkg@version`, never required by go.mod.
provision_dendrite() {
  local v=v0.13.8
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/dendrite-$v"
  if [ -x "$dir/dendrite" ] && [ -x "$dir/generate-keys" ] && [ -x "$dir/create-account" ]; then
    export ACRELAY_DENDRITE_BIN="$dir"
    ACRELAY_PROVISION_NOTES+=("Dendrite $v: cached at $dir")
    return
  fi
  echo "== building Dendrite $v (about 70 s cold on 2 cores)"
  mkdir -p "$dir"
  if GOBIN="$dir" CGO_ENABLED=0 go install \
      "github.com/matrix-org/dendrite/cmd/dendrite@$v" \
      "github.com/matrix-org/dendrite/cmd/generate-keys@$v" \
      "github.com/matrix-org/dendrite/cmd/create-account@$v" >"$ACRELAY_TMP/dendrite-build.log" 2>&1; then
    export ACRELAY_DENDRITE_BIN="$dir"
    ACRELAY_PROVISION_NOTES+=("Dendrite $v: built into $dir")
  else
    tail -20 "$ACRELAY_TMP/dendrite-build.log"
    ACRELAY_PROVISION_NOTES+=("Dendrite $v: SKIPPED - go install failed (see output above); the Matrix courier's Dendrite tests skip")
  fi
}
