# Sourced by scripts/provision.sh and scripts/lint.sh: provides the pinned
# staticcheck as $STATICCHECK, built once with `go install` into a cache
# directory and reused while it reports the pinned version.
#   ACRELAY_STATICCHECK_VERSION  the honnef.co/go/tools module version
#                                (v0.8.2 is staticcheck 2026.2.2, built for Go 1.26)
#   ACRELAY_TOOLS_BIN            where it is installed
#                                (default ${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/bin)
ACRELAY_STATICCHECK_VERSION="${ACRELAY_STATICCHECK_VERSION:-v0.8.2}"

# --- staticcheck (lint) -----------------------------------------------------
provision_staticcheck() {
  local bin="${ACRELAY_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/bin}"
  local want="(${ACRELAY_STATICCHECK_VERSION#v})"
  unset STATICCHECK
  if "$bin/staticcheck" -version 2>/dev/null | grep -qF "$want"; then
    STATICCHECK="$bin/staticcheck"
    ACRELAY_PROVISION_NOTES+=("staticcheck: $("$STATICCHECK" -version) at $STATICCHECK")
    return
  fi
  echo "== installing staticcheck $ACRELAY_STATICCHECK_VERSION into $bin"
  if mkdir -p "$bin" && GOBIN="$bin" go install "honnef.co/go/tools/cmd/staticcheck@$ACRELAY_STATICCHECK_VERSION" &&
      "$bin/staticcheck" -version 2>/dev/null | grep -qF "$want"; then
    STATICCHECK="$bin/staticcheck"
    ACRELAY_PROVISION_NOTES+=("staticcheck: installed $("$STATICCHECK" -version) at $STATICCHECK")
  else
    ACRELAY_PROVISION_NOTES+=("staticcheck: SKIPPED - go install honnef.co/go/tools/cmd/staticcheck@$ACRELAY_STATICCHECK_VERSION failed (is the module proxy reachable?)")
  fi
}
