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

# Output of a stage started in the background (`started`) is printed when it is waited for (`waited`),
# with its time from its start to its end; a failed one stops the run there, as `stage` does. Each runs in
# its own process group (setsid), which is ended, by its id, if the run stops before it was waited for.
declare -A bg_pid bg_start bg_dir
started() {
  local name="$1"
  shift
  echo "test.sh: === $name: $* (in the background)" >&2
  bg_dir[$name]="$(mktemp -d)"
  bg_start[$name]="$(date +%s%N)"
  setsid bash -c '"$@" >"$0/out" 2>&1; echo "$? $(date +%s%N)" >"$0/end"' "${bg_dir[$name]}" "$@" &
  bg_pid[$name]="$!"
}
end_background() {
  local name
  for name in "${!bg_pid[@]}"; do kill -- "-${bg_pid[$name]}" 2>/dev/null; done
}
trap end_background EXIT
waited() {
  local name="$1" status ended
  wait "${bg_pid[$name]}"
  unset "bg_pid[$name]"
  echo "test.sh: === $name (its output; it ran in the background):" >&2
  cat "${bg_dir[$name]}/out"
  read -r status ended <"${bg_dir[$name]}/end"
  rm -rf "${bg_dir[$name]}"
  summary+=("$(printf '%-18s %7.1f s%s' "$name" "$(( (ended - bg_start[$name]) / 1000000 ))e-3" \
    "$([ "$status" -eq 0 ] || echo "  FAILED ($status)")")")
  if [ "$status" -ne 0 ]; then
    report
    exit "$status"
  fi
}

vitest=node_modules/vitest/vitest.mjs
# pytest from the start, beside the static checks and the unit project: it waits on its built server most
# of its time (64 s of CPU in 110–117 s alone), and none of those holds a wall-clock bound a busy neighbour
# breaks. The process suites do (a client deadline answered in time, a high-priority lane within 3× its
# unloaded latency: beside pytest, one answered 900 ms after an 800 ms deadline), and the slow project's
# bursts do (beside pytest, an engine burst ran 1.18 × its 1.1 bound): those run after it, alone.
# pytest builds dist/ through test/support/dist.ts, whose lock makes the process suites wait for that build.
started pytest npm run --silent test:py
# The static checks side by side: each one process that reads every file and waits for nothing else.
started typecheck npm run --silent typecheck
started lint npm run --silent lint
started format npm run --silent format:check
waited typecheck
waited lint
waited format
stage vitest:unit node "$vitest" run --project unit --project unit-isolated
waited pytest
# The other vitest projects one by one, in vitest.config.ts's group order.
stage vitest:process node "$vitest" run --project process
stage vitest:unit-timing node "$vitest" run --project unit-timing
stage vitest:slow node "$vitest" run --project slow --project slow-engine
report
