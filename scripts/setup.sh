#!/usr/bin/env bash
# Set up orch on a fresh Debian machine: system packages (as root, only what is missing), a virtual
# environment in .venv with orch, its dev tools (transformers among them) and the CPU build of torch (the local host
# runs suites on CPU).
# Usage: scripts/setup.sh [--system]   --system also installs the test bed's Debian packages
# (openssh-server, postgresql, docker-compose, stress-ng, slurm-wlm, slurmdbd, munge, mariadb-server).
set -euo pipefail
cd "$(dirname "$0")/.."
want_system=${1:-}
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
    echo "setup: installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "setup: please install: ${need[*]} (sudo apt-get install ...)" >&2
    exit 1
  fi
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
# torch: the CPU build (2.13.0) for the local host and the test bed's simulated hosts.
.venv/bin/python -c 'import torch' 2>/dev/null || \
  .venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0" numpy 2>&1 | grep -v '^WARNING: Location' || true
PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]' 2>&1 | grep -v '^WARNING: Location' || true
# transformers comes with .[dev]: the decode suite's model, imported by the agent under this python on the
# local host and the test bed's hosts.
.venv/bin/python -c 'import orchestrator, torch, asyncssh, transformers' >/dev/null
