#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs (as root: openssh-server, postgresql,
# docker-compose; a .venv with the Python packages), then ruff, mypy and pytest (real sshd and PostgreSQL are
# started by the pytest fixtures themselves). Extra arguments go to pytest. A service that cannot start (sshd,
# PostgreSQL, docker-compose) FAILS its tests, naming the reason and the fix; skipping them is an explicit opt-in
# for a partial run, ORCH_TEST_SKIP_SERVICES=postgres (or a comma list, or all), ignored under CI
# (tests/plugins/services.py). Deadlines scale with ORCH_TEST_TIME_SCALE (tests/plugins/timing.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --system
echo "== ruff"; .venv/bin/ruff check .
echo "== mypy"; .venv/bin/mypy
echo "== pytest"; .venv/bin/python -m pytest -q "$@"
