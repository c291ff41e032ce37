# Sourced by scripts/provision.sh: provides Synapse, Element's reference
# Matrix homeserver, for the encrypted-room tests (issue 31), as a minimal
# Debian sid root in the user cache with Debian's `matrix-synapse` in it
# (the package exists only in sid), exported as ACRELAY_SYNAPSE_ROOT. The
# Go tests start Synapse themselves from that root (internal/synapsetest:
# `unshare` a private mount namespace, chroot into the root, the test's
# temporary directory bind-mounted for config and SQLite database, a free
# port on 127.0.0.1) and skip when it is absent.
#
# The root is made once with `debootstrap --variant=minbase sid` from the
# mirror apt already uses (read from apt's sources at run time), then
# `apt-get install --no-install-recommends matrix-synapse` inside it, with
# a policy-rc.d that forbids starting services and Check-Valid-Until off
# (a mirror's sid Release file may be older than the clock). About 93 MB
# downloaded, 550 MB on disk, a minute the first time; reused after. It is
# built in a temporary directory beside the cache and renamed into place
# only when complete, so an interrupted run never leaves a half root that
# a later run would take as good. It needs root (debootstrap, chroot and
# mounts); the tests and CI run as root. debootstrap is installed from the
# host's Debian when missing.
ACRELAY_SYNAPSE_VERSION=${ACRELAY_SYNAPSE_VERSION:-1.160.0}

# synapse_root_ok DIR: DIR is a complete root (the marker is written last).
synapse_root_ok() {
  [ -f "$1/.acrelay-synapse-version" ] && [ -x "$1/usr/bin/python3" ] &&
    [ -d "$1/usr/lib/python3/dist-packages/synapse" ]
}

# synapse_mirror: the first Debian archive URI in apt's sources (deb822
# .sources files, then sources.list), e.g. http://deb.debian.org/debian.
synapse_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f" | grep -v -- '-security' | head -1)
    [ -n "$uri" ] && { echo "${uri%/}"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' "$f" | grep -v -- '-security' | head -1)
    [ -n "$uri" ] && { echo "${uri%/}"; return; }
  done
}

provision_synapse() {
  local base="${XDG_CACHE_HOME:-$HOME/.cache}/acrelay"
  local dir="$base/synapse-sid-$ACRELAY_SYNAPSE_VERSION" d
  if ! synapse_root_ok "$dir"; then
    # A root of another version that sid had when it was made.
    for d in $(ls -d "$base"/synapse-sid-* 2>/dev/null | sort -V -r); do
      synapse_root_ok "$d" && { dir=$d; break; }
    done
  fi
  if synapse_root_ok "$dir"; then
    export ACRELAY_SYNAPSE_ROOT="$dir"
    ACRELAY_PROVISION_NOTES+=("Synapse $(cat "$dir/.acrelay-synapse-version"): cached Debian sid root at $dir")
    return
  fi
  unset ACRELAY_SYNAPSE_ROOT
  if [ "$(id -u)" != 0 ]; then
    ACRELAY_PROVISION_NOTES+=("Synapse: SKIPPED - making its Debian sid root needs root (debootstrap, chroot); the encrypted-room tests run on Dendrite only")
    return
  fi
  if ! command -v apt-get >/dev/null || ! command -v unshare >/dev/null; then
    ACRELAY_PROVISION_NOTES+=("Synapse: SKIPPED - no apt-get or unshare here; the encrypted-room tests run on Dendrite only")
    return
  fi
  if ! unshare --mount --propagation private true 2>/dev/null; then
    ACRELAY_PROVISION_NOTES+=("Synapse: SKIPPED - cannot make a mount namespace here (unshare --mount: a container without CAP_SYS_ADMIN?); the encrypted-room tests run on Dendrite only")
    return
  fi
  local mirror; mirror=$(synapse_mirror)
  if [ -z "$mirror" ]; then
    ACRELAY_PROVISION_NOTES+=("Synapse: SKIPPED - no Debian mirror in apt's sources; the encrypted-room tests run on Dendrite only")
    return
  fi
  if ! command -v debootstrap >/dev/null; then
    echo "== installing Debian's debootstrap (Synapse's sid root)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1) || true
  fi
  if ! command -v debootstrap >/dev/null; then
    ACRELAY_PROVISION_NOTES+=("Synapse: SKIPPED - debootstrap is not installed and could not be installed; the encrypted-room tests run on Dendrite only")
    return
  fi
  echo "== making a Debian sid root with matrix-synapse from $mirror (about 93 MB, a minute the first time)"
  mkdir -p "$base"
  # What an interrupted run left (its mounts died with its namespace).
  find "$base" -maxdepth 1 -name '.synapse-sid.tmp.*' -mmin +120 -exec rm -rf {} + 2>/dev/null || true
  local tmp log="$ACRELAY_TMP/synapse-root.log" started=$SECONDS
  tmp=$(mktemp -d "$base/.synapse-sid.tmp.XXXXXX")
  chmod 755 "$tmp"
  # Inside a private mount namespace: /proc and /dev for the package
  # scripts vanish with it, whatever happens.
  if DEBIAN_FRONTEND=noninteractive unshare --mount --propagation private sh -euc '
      r=$1; mirror=$2
      debootstrap --variant=minbase sid "$r" "$mirror"
      printf "#!/bin/sh\nexit 101\n" >"$r/usr/sbin/policy-rc.d"; chmod 755 "$r/usr/sbin/policy-rc.d"
      printf "Acquire::Check-Valid-Until \"false\";\n" >"$r/etc/apt/apt.conf.d/99acrelay-valid-until"
      mount -t proc proc "$r/proc"
      mount --rbind /dev "$r/dev"
      chroot "$r" apt-get update -q
      chroot "$r" apt-get install -y -q --no-install-recommends matrix-synapse
      chroot "$r" apt-get clean
      mkdir -p "$r/srv/acrelay"
      chroot "$r" dpkg-query -W -f "\${Version}" matrix-synapse >"$r/.acrelay-synapse-version.tmp"
    ' sh "$tmp" "$mirror" >"$log" 2>&1; then
    local full; full=$(cat "$tmp/.acrelay-synapse-version.tmp")
    local v=${full%%-*}; v=${v#*:}
    dir="$base/synapse-sid-$v"
    if [ -e "$dir" ]; then rm -rf "$dir"; fi
    mv "$tmp/.acrelay-synapse-version.tmp" "$tmp/.acrelay-synapse-version"
    if mv -T "$tmp" "$dir"; then
      export ACRELAY_SYNAPSE_ROOT="$dir"
      ACRELAY_PROVISION_NOTES+=("Synapse $full: Debian sid root made at $dir in $((SECONDS - started)) s ($(du -sm "$dir" | cut -f1) MB)")
      return
    fi
  fi
  tail -20 "$log"
  rm -rf "$tmp"
  ACRELAY_PROVISION_NOTES+=("Synapse: SKIPPED - its Debian sid root could not be made (see the output above); the encrypted-room tests run on Dendrite only")
}
