#!/usr/bin/env bash
# The main job (the README's first command): install the Debian packages, build the `default`
# preset, then check every kernel that can run on this machine with `nvfp4check run`.
# Arguments go to `nvfp4check run` (e.g. --seconds 600 --report report.json).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
exec build/default/cli/nvfp4check run "$@"
