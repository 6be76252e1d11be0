#!/usr/bin/env bash
# `npm test` (and so `.ci/run`): every check, one stage at a time, each timed, on the runtime we ship.
#
# The image runs Node 24 LTS and package.json's engines promise >=24 only, so every stage runs on Node 24:
# the machine's own node when it is 24 or newer, else the npm registry's pinned build (scripts/node24.sh),
# put first on PATH so child processes (the built server, the CLIs, pytest's server) run on it too.
# Without a registry it warns and runs on the machine's node, except under CI=true, where it fails.
# Stops at the first failing stage; prints every stage's duration and the load average at the end.
set -uo pipefail
cd "$(dirname "$0")/.."

major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 24 ]; then
  node24="$(bash scripts/node24.sh -p 'process.execPath')" || exit 1
  if [ -n "$node24" ]; then
    PATH="$(dirname "$node24"):$PATH"
    export PATH
  else
    echo "test.sh: WARNING: no Node 24; the suite runs on the machine's $(node --version), outside engines" >&2
  fi
fi
echo "test.sh: node $(node --version) ($(command -v node)), load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" >&2

summary=()
total_start=$(date +%s%N)
report() {
  echo
  echo "stage times (node $(node --version), load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)):"
  for row in "${summary[@]}"; do echo "  $row"; done
  printf '  %-18s %7.1f s\n' total "$(( ($(date +%s%N) - total_start) / 1000000 ))e-3"
}
stage() {
  local name="$1"
  shift
  echo "test.sh: === $name: $*" >&2
  local start status
  start=$(date +%s%N)
  "$@"
  status=$?
  summary+=("$(printf '%-18s %7.1f s%s' "$name" "$(( ($(date +%s%N) - start) / 1000000 ))e-3" \
    "$([ "$status" -eq 0 ] || echo "  FAILED ($status)")")")
  if [ "$status" -ne 0 ]; then
    report
    exit "$status"
  fi
}

vitest=node_modules/vitest/vitest.mjs
stage typecheck npm run --silent typecheck
stage lint npm run --silent lint
stage format npm run --silent format:check
# The vitest projects one by one, in vitest.config.ts's group order (each waits for the one before anyway).
stage vitest:unit node "$vitest" run --project unit --project unit-isolated
stage vitest:process node "$vitest" run --project process
stage vitest:unit-timing node "$vitest" run --project unit-timing
stage vitest:slow node "$vitest" run --project slow
stage pytest npm run --silent test:py
report
