# Sourced by scripts/provision.sh: provides Debian's Chromium for the live
# web view's browser test (relay/ui_browser_test.go, driven with chromedp),
# exported as ACRELAY_CHROMIUM. Installed from Debian when missing (as root);
# without it that test skips and says why.

# --- Chromium (headless browser test of /ui) ---------------------------------
provision_chromium() {
  local bin="${ACRELAY_CHROMIUM:-/usr/bin/chromium}"
  if [ ! -x "$bin" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian's chromium (live web view browser test)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1) || true
  fi
  if [ -x "$bin" ]; then
    export ACRELAY_CHROMIUM="$bin"
    ACRELAY_PROVISION_NOTES+=("Chromium: $("$bin" --version 2>/dev/null || echo "$bin")")
  else
    unset ACRELAY_CHROMIUM
    ACRELAY_PROVISION_NOTES+=("Chromium: SKIPPED - $bin missing and could not be installed; TestUIBrowser skips")
  fi
}
