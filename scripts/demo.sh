#!/usr/bin/env bash
# The main job on the embedded default: SQLite at ./orch.db and the shipped inventory.yaml (its `local` host).
# Sets up .venv, then: doctor, deploy, the moe-sweep suite (tiny preset on CPU), and the stored run's table.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "demo: $*"; }
say "setting up (scripts/setup.sh: Debian packages and .venv; a few minutes the first time, seconds after)..."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
say "creating or upgrading the results database ./orch.db (orch db upgrade)..."
orch db upgrade
say "checking the local host (orch doctor --hosts local)..."
orch doctor --hosts local || true   # a CPU-only machine warns "no GPU"; the run below still works
say "deploying the agent to the local host (orch deploy --hosts local)..."
orch deploy --hosts local           # the agent, content-addressed (a second deploy uploads nothing)
say "running the moe-sweep suite, tiny preset (orch run moe-sweep --hosts local --preset tiny)..."
orch run moe-sweep --hosts local --preset tiny "$@"
echo
echo "Results are stored in $PWD/orch.db (SQLite). The local host's run state (spool, spec, outputs) is under"
echo "~/.orch/runs/ (set orch_home: for it in inventory.yaml to move it). Next: orch runs list; orch runs show RUN_ID;"
echo "orch serve (results API at http://127.0.0.1:8000/api/v1, dashboard at http://127.0.0.1:8000/)."
