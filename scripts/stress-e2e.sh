#!/usr/bin/env bash
# The end-to-end tests with every core busy: stress-ng burns one CPU worker per core while pytest runs
# tests/e2e (or the paths/options given), N times in a row (default 3); stops at the first failing round.
# Usage: scripts/stress-e2e.sh [-n ROUNDS] [-j WORKERS] [pytest args...]   e.g. scripts/stress-e2e.sh -n 1 -k ctrl_c
# -j WORKERS spreads the test files over that many pytest-xdist workers (--dist loadfile: a file's tests stay on
# one worker, in order) besides the burners: more load than the burners alone, and a round in about half the time
# (one serial round under stress takes ~80 min on a 2-core machine).
# Deadlines in the tests scale with ORCH_TEST_TIME_SCALE (tests/plugins/timing.py); this script does not set it.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
workers=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) rounds=$2; shift 2 ;;
    -j) workers=(-n "$2" --dist loadfile); shift 2 ;;
    *) break ;;
  esac
done
command -v stress-ng >/dev/null || { echo "stress-e2e: install stress-ng (scripts/setup.sh --system)" >&2; exit 1; }
[ $# -gt 0 ] || set -- tests/e2e
stress-ng --cpu "$(nproc)" --timeout 0 --quiet &
burner=$!
trap 'kill "$burner" 2>/dev/null; wait "$burner" 2>/dev/null || true' EXIT
for i in $(seq 1 "$rounds"); do
  echo "== round $i/$rounds under stress-ng --cpu $(nproc) at $(date -u +%H:%M:%S) UTC; load: $(cut -d' ' -f1-3 /proc/loadavg)"
  .venv/bin/python -m pytest -q -x -p no:cacheprovider "${workers[@]}" "$@"
done
echo "== $rounds round(s) passed at $(date -u +%H:%M:%S) UTC; load: $(cut -d' ' -f1-3 /proc/loadavg)"
