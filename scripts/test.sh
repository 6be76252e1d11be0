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

# Stages run side by side: each one's output is printed after all end, in order; each is timed from the
# common start to its own end; the first that failed decides the exit status.
parallel_stages() {
  local dir names=() pids=() starts=() i status failed=0
  dir="$(mktemp -d)"
  while [ "$#" -gt 0 ]; do
    names+=("$1")
    echo "test.sh: === $1: $2 (beside the others)" >&2
    starts+=("$(date +%s%N)")
    # shellcheck disable=SC2086 # the command is a word list by design
    (set +e; $2 >"$dir/${#names[@]}.out" 2>&1; echo "$? $(date +%s%N)" >"$dir/${#names[@]}.end") &
    pids+=("$!")
    shift 2
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}"; done
  for i in "${!names[@]}"; do
    cat "$dir/$((i + 1)).out"
    read -r status ended <"$dir/$((i + 1)).end"
    summary+=("$(printf '%-18s %7.1f s%s' "${names[$i]}" "$(( (ended - starts[i]) / 1000000 ))e-3" \
      "$([ "$status" -eq 0 ] || echo "  FAILED ($status)")")")
    [ "$status" -eq 0 ] || [ "$failed" -ne 0 ] || failed="$status"
  done
  rm -rf "$dir"
  if [ "$failed" -ne 0 ]; then
    report
    exit "$failed"
  fi
}

vitest=node_modules/vitest/vitest.mjs
# The static checks at once: each is one single-threaded process that reads every file and waits for nothing
# else, so on 2 cores they overlap (typecheck 17 s + lint 34 s + format 12 s one by one).
parallel_stages typecheck 'npm run --silent typecheck' lint 'npm run --silent lint' \
  format 'npm run --silent format:check'
# The vitest projects one by one, in vitest.config.ts's group order (each waits for the one before anyway).
stage vitest:unit node "$vitest" run --project unit --project unit-isolated
# pytest beside the process suites: it waits on the built server most of its time (64 s of CPU in 117 s
# alone), and neither holds a timing bound that a busy neighbour breaks (the slow project's do: it runs
# alone, after). Both build dist/ through test/support/dist.ts, whose lock makes one of them build it.
parallel_stages vitest:process "node $vitest run --project process" pytest 'npm run --silent test:py'
stage vitest:unit-timing node "$vitest" run --project unit-timing
stage vitest:slow node "$vitest" run --project slow
report
