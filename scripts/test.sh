#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd "${TRAINYARD_BUILD_DIR:-build}"
ctest --output-on-failure -j "${TRAINYARD_TEST_JOBS:-2}"
