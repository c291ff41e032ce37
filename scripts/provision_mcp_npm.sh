# Sourced by scripts/provision.sh: installs the official TypeScript MCP SDK
# (@modelcontextprotocol/sdk 1.32.2, an MCP client nobody here wrote) with
# the machine's Node.js into the user cache, reused when present, and
# exports its node_modules as ACRELAY_MCP_NPM_MODULES for the `acrelay mcp`
# interop test (cmd/acrelay/mcp_ts_test.go), which skips when it is absent.
provision_mcp_npm() {
  local pkg=@modelcontextprotocol/sdk@1.32.2
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/npm-mcp-sdk-1.32.2"
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "== installing Debian's nodejs and npm (MCP interop test)"
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null 2>&1) || true
    fi
  fi
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    ACRELAY_PROVISION_NOTES+=("npm $pkg: SKIPPED - no node/npm and could not install them; the MCP interop test skips")
    return
  fi
  if [ -f "$dir/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
    export ACRELAY_MCP_NPM_MODULES="$dir/node_modules"
    ACRELAY_PROVISION_NOTES+=("npm $pkg: cached at $dir (node $(node --version))")
    return
  fi
  mkdir -p "$dir"
  if npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$pkg" >"$ACRELAY_TMP/npm-mcp-install.log" 2>&1; then
    export ACRELAY_MCP_NPM_MODULES="$dir/node_modules"
    ACRELAY_PROVISION_NOTES+=("npm $pkg: installed into $dir (node $(node --version))")
  else
    tail -20 "$ACRELAY_TMP/npm-mcp-install.log"
    ACRELAY_PROVISION_NOTES+=("npm $pkg: SKIPPED - npm install failed (see output above); the MCP interop test skips")
  fi
}
