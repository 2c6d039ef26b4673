#!/usr/bin/env bash
# The main job on the embedded default: SQLite at ./orch.db and the shipped inventory.yaml (its `local` host).
# Sets up .venv, then: doctor, deploy, the moe-sweep suite (tiny preset on CPU), and the stored run's table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
orch db upgrade
orch doctor --hosts local || true   # a CPU-only machine warns "no GPU"; the run below still works
orch run moe-sweep --hosts local --preset tiny "$@"
