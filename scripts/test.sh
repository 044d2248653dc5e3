#!/usr/bin/env bash
# The whole test suite: installs and builds (scripts/setup.sh), runs every
# test through ctest, then every fuzz target for TROUPE_FUZZ_SECONDS (default
# 60) seconds (scripts/fuzz.sh). Fails when either fails.
#   unit only:         ctest --test-dir build -LE integration --output-on-failure
#   integration only:  ctest --test-dir build -L integration --output-on-failure
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# Tests without their own TIMEOUT property get 15 minutes.
set +e
ctest --test-dir build --output-on-failure -j2 --timeout 900
rc=$?
# The fault-injection suite's four figures (ctest shows a passing test's output not at all).
if [ -f build/tests/fault/fault-report.txt ]; then
  echo "--- fault-injection suite (tests/fault) ---"
  head -4 build/tests/fault/fault-report.txt
fi
if [ -f build/tests/fault/fault-report-nats-cluster.txt ]; then
  echo "--- fault-injection suite on a 3-server NATS cluster (tests/fault) ---"
  head -4 build/tests/fault/fault-report-nats-cluster.txt
fi
bash scripts/fuzz.sh
fuzz_rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "test: ctest failed (exit $rc)" >&2
  exit "$rc"
fi
if [ "$fuzz_rc" -ne 0 ]; then
  echo "test: fuzzing failed (exit $fuzz_rc)" >&2
  exit "$fuzz_rc"
fi
