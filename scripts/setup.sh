#!/usr/bin/env bash
# Installs the Debian 12 packages Troupe builds with (skipped when every one is
# already installed, so a rerun is quick), then configures and builds into
# build/ (binaries in build/bin/). Safe to run again at any time. clang and
# libclang-rt-dev (libFuzzer, the sanitizers) are for scripts/fuzz.sh only;
# bubblewrap, podman, runc and busybox-static for job sandboxes, containers
# and the local test image (docs/security.md). chromium, nodejs and npm are
# for the web console's real-browser test (tests/browser, playwright-core
# driving Debian's chromium; npm ci never downloads a browser).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ pkg-config
  libcaf-dev libnats-dev nats-server
  flatbuffers-compiler libflatbuffers-dev libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev libcivetweb-dev catch2 libcli11-dev libspdlog-dev libyaml-cpp-dev
  nlohmann-json3-dev libcpp-httplib-dev libbenchmark-dev openssl libssl-dev
  libhowardhinnant-date-dev
  prometheus
  passwd bubblewrap podman runc busybox-static
  clang libclang-rt-dev
  chromium nodejs npm
  ca-certificates git
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: dpkg-query not found: this script expects Debian 12 (bookworm)" >&2
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  # NodeSource's nodejs package ships npm itself (Provides/Conflicts: npm):
  # there, Debian's npm cannot be installed and is not needed.
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then
    continue
  fi
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} > 0)); then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "setup: missing packages (${missing[*]}) and not root, and sudo is not installed" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages are installed"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build
echo "setup: built into build/ (binaries in build/bin/)"

if [ ! -d tests/browser/node_modules ]; then
  echo "setup: installing the browser test's node modules (tests/browser)"
  if ! (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund); then
    echo "setup: npm ci failed in tests/browser" >&2
    exit 1
  fi
fi
