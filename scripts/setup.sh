#!/usr/bin/env bash
# Set up orch on a fresh Debian machine: system packages (as root, only what is missing), a virtual
# environment in .venv with orch, its dev tools (transformers among them) and the CPU build of torch (the local host
# runs suites on CPU).
# Usage: scripts/setup.sh [--system]   --system also installs the test bed's Debian packages
# (openssh-server, postgresql, docker-compose, stress-ng, slurm-wlm, slurmdbd, munge, mariadb-server).
# Each step prints one "setup: ..." line (on stderr) before it starts; the long pip installs show pip's own
# progress (Collecting/Downloading/Installing lines), so a first run is never minutes of silence. A failed pip
# install shows pip's error and is caught by the import check at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
want_system=${1:-}
step() { echo "setup: $*" >&2; }
# pip's output without its "Location" warnings and the one line per package that is already installed
pip_filter() { grep --line-buffered -v -e '^WARNING: Location' -e '^Requirement already satisfied' || true; }
need=()
command -v python3 >/dev/null || need+=(python3 python3-venv)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [ "$want_system" = "--system" ]; then
  [ -x /usr/sbin/sshd ] || need+=(openssh-server)
  command -v ssh-keygen >/dev/null || need+=(openssh-client)
  command -v ip >/dev/null || need+=(iproute2)  # network namespaces for the jump-host tests
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v docker-compose >/dev/null || need+=(docker-compose)
  command -v pgrep >/dev/null || need+=(procps)
  command -v stress-ng >/dev/null || need+=(stress-ng)  # scripts/stress-e2e.sh: the e2e tests with both cores busy
  [ -x /usr/bin/chromium ] || need+=(chromium)  # the dashboard's browser test (Playwright drives Debian's chromium)
  # a real single-node Slurm 22.05 with accounting for the Slurm tests (tests/plugins/slurm.py)
  command -v slurmctld >/dev/null || need+=(slurm-wlm)
  command -v slurmdbd >/dev/null || need+=(slurmdbd)
  command -v munged >/dev/null || need+=(munge)
  command -v mariadbd >/dev/null || need+=(mariadb-server)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    step "installing Debian packages: ${need[*]} (apt-get; a minute or more)..."
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "setup: please install: ${need[*]} (sudo apt-get install ...)" >&2
    exit 1
  fi
fi
if [ ! -x .venv/bin/python ]; then
  step "creating .venv (a Python virtual environment for orch)..."
  python3 -m venv .venv
fi
# pip runs only when pyproject.toml changed since the last setup that finished (its sha256 in .venv): a second
# setup with nothing to do takes seconds, not the ~25 s of pip resolving every dependency again
stamp=.venv/.orch-setup-pyproject.sha256
if [ -f "$stamp" ] && sha256sum --quiet -c "$stamp" >/dev/null 2>&1 \
   && .venv/bin/python -c 'import orchestrator, torch, asyncssh, transformers' >/dev/null 2>&1; then
  step "done: .venv is ready (pyproject.toml unchanged since the last setup; delete $stamp to reinstall)"
  exit 0
fi
step "updating pip in .venv..."
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | pip_filter || true
# torch: the CPU build (2.13.0) for the local host and the test bed's simulated hosts.
if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  step "installing torch 2.13.0 and numpy into .venv (a large download; a few minutes)..."
  .venv/bin/python -m pip install --disable-pip-version-check "torch==2.13.0" numpy 2>&1 | pip_filter || true
fi
step "installing orch and its dev tools into .venv (pip install -e '.[dev]'; a few minutes the first time)..."
PYTHONWARNINGS=ignore .venv/bin/python -m pip install --disable-pip-version-check -e '.[dev]' 2>&1 | pip_filter || true
# transformers comes with .[dev]: the decode suite's model, imported by the agent under this python on the
# local host and the test bed's hosts.
step "checking the installation (import orchestrator, torch, asyncssh, transformers)..."
.venv/bin/python -c 'import orchestrator, torch, asyncssh, transformers' >/dev/null
[ ! -f pyproject.toml ] || sha256sum pyproject.toml > "$stamp"  # a copy without it (the tests) keeps no stamp
step "done: .venv is ready"
