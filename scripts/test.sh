#!/usr/bin/env bash
# The whole test suite: installs and builds (scripts/setup.sh), then runs every
# test through ctest. The exit code is ctest's.
#   unit only:         ctest --test-dir build -LE integration --output-on-failure
#   integration only:  ctest --test-dir build -L integration --output-on-failure
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# Tests without their own TIMEOUT property get 15 minutes.
set +e
ctest --test-dir build --output-on-failure -j2 --timeout 900
rc=$?
set -e
exit "$rc"
