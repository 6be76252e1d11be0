#!/usr/bin/env bash
# The Python client's test suite, against the real server built from this checkout.
# Run by `npm run test:py` (part of `npm test`). Extra arguments go to pytest, e.g. `-k trl -x`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"

if ! "$python" -c 'import pytest' 2>/dev/null; then
  echo "run-tests.sh: $python has no pytest (install it: $python -m pip install pytest)" >&2
  exit 1
fi

# The suite starts `node dist/server/main.js`: build it unless it is newer than every source (inside
# `npm test` the process suite has built it already, so dist/ is built once per run).
(cd "$root" && node --import tsx test/support/dist.ts)

cd "$here"
status=0
"$python" -m pytest -p no:cacheprovider "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "run-tests.sh: pytest collected no tests; treating that as a failure" >&2
  exit 1
fi
exit "$status"
