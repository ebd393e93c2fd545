#!/usr/bin/env bash
# The whole test suite: setup, build, then ctest (unit, models, error paths, example).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${BUILD_DIR:-$here/build}"
"$here/scripts/setup.sh"
"$here/scripts/build.sh" "$build"
cd "$build" && ctest --output-on-failure -j "$(nproc)" "$@"
