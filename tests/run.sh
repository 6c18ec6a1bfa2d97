#!/usr/bin/env bash
# The project's test command (the README's): PostgreSQL answering at 127.0.0.1:5432/test (Debian's package
# installed and started when missing), the real rig's components built from their Go modules when the cache in
# rig/.bin lacks them (rig/build.sh; a few seconds when Go's caches are warm), then pytest over tests/ with any
# arguments given here. Tests marked real_rig run on the simulator and on one `dispatcher rig up --real`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tests/postgres.sh
# The dashboard test (tests/api/test_dashboard.py) drives Debian's headless Chromium.
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; } \
    || echo "tests/run.sh: chromium not installable; the dashboard test will fail"
fi
bash rig/build.sh
exec python -m pytest -q -p no:cacheprovider --import-mode=importlib tests "$@"
