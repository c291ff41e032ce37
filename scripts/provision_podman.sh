# Sourced by scripts/provision.sh: provides Debian's podman and
# podman-compose for the deploy/ tests (the release image built from
# deploy/Containerfile, and deploy/compose.yaml), exported as
# ACRELAY_PODMAN and ACRELAY_PODMAN_COMPOSE. Installed from Debian when
# missing (as root), with runc: crun refuses hosts whose cgroups are a
# v1/v2 hybrid, and the tests fall back to runc there. No base image is
# ever pulled: the image is FROM scratch around the static binary. Without
# podman those tests skip and say why; a podman that cannot run containers
# here makes them skip with its exact error.
provision_podman() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v podman-compose >/dev/null || missing+=(podman-compose)
  command -v runc >/dev/null || missing+=(runc)
  if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian's ${missing[*]} (deploy/ image and compose tests)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1) || true
  fi
  if command -v podman >/dev/null; then
    export ACRELAY_PODMAN="$(command -v podman)"
    ACRELAY_PROVISION_NOTES+=("podman: $(podman --version 2>/dev/null)$(command -v runc >/dev/null && echo ", runc $(runc --version 2>/dev/null | head -1 | awk '{print $3}')")")
  else
    unset ACRELAY_PODMAN
    ACRELAY_PROVISION_NOTES+=("podman: SKIPPED - not installed and could not be installed (needs root and apt-get); the deploy/ image and compose tests skip")
  fi
  if command -v podman-compose >/dev/null; then
    export ACRELAY_PODMAN_COMPOSE="$(command -v podman-compose)"
    ACRELAY_PROVISION_NOTES+=("podman-compose: podman-compose $(podman-compose version 2>/dev/null | sed -n 's/^podman-composer* version *//p' | head -1)")
  else
    unset ACRELAY_PODMAN_COMPOSE
    ACRELAY_PROVISION_NOTES+=("podman-compose: SKIPPED - not installed and could not be installed; the deploy/ compose test skips")
  fi
}
