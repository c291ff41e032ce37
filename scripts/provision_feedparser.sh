# Sourced by scripts/provision.sh: Debian's python3-feedparser (feedparser
# 6.0), the independent Atom parser of the feed capability's archive walk
# (relay TestFeedCapabilityArchiveWalk). The test runs it with /usr/bin/python3,
# the Debian interpreter the package installs into, never a python on PATH.

# --- feedparser (independent Atom parser) -----------------------------------
provision_feedparser() {
  if /usr/bin/python3 -c 'import feedparser' >/dev/null 2>&1; then
    ACRELAY_PROVISION_NOTES+=("feedparser: $(/usr/bin/python3 -c 'import feedparser; print(feedparser.__version__)') for /usr/bin/python3")
    return
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian's python3-feedparser (independent Atom parser)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends python3-feedparser >/dev/null 2>&1) || true
  fi
  if /usr/bin/python3 -c 'import feedparser' >/dev/null 2>&1; then
    ACRELAY_PROVISION_NOTES+=("feedparser: installed python3-feedparser $(/usr/bin/python3 -c 'import feedparser; print(feedparser.__version__)') from Debian")
  else
    ACRELAY_PROVISION_NOTES+=("feedparser: SKIPPED - /usr/bin/python3 cannot import feedparser and python3-feedparser could not be installed (needs root and apt-get; an apt-get failure is hidden, run it by hand to see why); the feed capability walk checks with gofeed only")
  fi
}
