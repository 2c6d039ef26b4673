#!/usr/bin/env bash
# bench/fanout_scale.py at fleet sizes on the lent 16-core GPU machine (issue 18), in one command, from the project
# root, carrying .gpu-carry (filled by ../shared/gpu-testbed/fetch.sh; see /work/shared/gpu-testbed/README.md):
#
#   bash bench/fanout_scale_device.sh
#
# What it does there (nothing is fetched from a network):
# - bash .gpu-carry/start-sshd.sh: unpacks Debian's OpenSSH into /tmp/ssh, creates the sshd privilege-separation
#   user, installs the carried wheels into the torch Python; then PATH/LD_LIBRARY_PATH name the carried OpenSSH
#   (the bench starts its own sshd processes from it: one per 16 simulated hosts, 63 for 1,000 hosts) and the
#   project goes into the torch Python without dependencies (and on PYTHONPATH, so this checkout is what runs);
# - the open-files limit: raised to its hard limit, which must hold orch's need at the bench's concurrency
#   (41 + 4 per host in flight, as orch itself checks: 297 at 64) with room for the floors' connections;
# - per size, `bench/fanout_scale.py --hosts N --repeat R`: doctor and `orch run noop` against their floors.
#
# Settings (environment):
#   SIZES      "HOSTS:REPEAT ..." (default "64:2 200:1 500:1 1000:1"); measured in this order
#   BUDGET_S   seconds for all sizes (default 420): each size runs under `timeout` of what is left (a size cut
#              short keeps the lines it printed: every measurement prints its own line as it ends)
#   PY         the Python (default /opt/torch/.venv/bin/python3)
#   OUT        where the output goes (default /tmp/orch-scale-out): setup.txt and fanout-scale-N.txt per size
#   BENCH_ARGS more bench/fanout_scale.py options (e.g. --concurrency 128, --skip-run)
# Without .gpu-carry (e.g. on the development machine, with PY=.venv/bin/python), the OpenSSH on PATH is used and
# nothing is installed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${OUT:-/tmp/orch-scale-out}
mkdir -p "$out"
setup="$out/setup.txt"
: > "$setup"
say() { echo "$*" | tee -a "$setup"; }
PY=${PY:-/opt/torch/.venv/bin/python3}
SIZES=${SIZES:-"64:2 200:1 500:1 1000:1"}
BUDGET_S=${BUDGET_S:-420}
CONCURRENCY=64
for a in ${BENCH_ARGS:-}; do [ "${prev:-}" = --concurrency ] && CONCURRENCY=$a; prev=$a; done

if [ -f .gpu-carry/start-sshd.sh ]; then
  say "\$ bash .gpu-carry/start-sshd.sh"
  bash .gpu-carry/start-sshd.sh >> "$setup" 2>&1 || { say "start-sshd.sh failed (exit $?): see above"; exit 1; }
  export PATH=/tmp/ssh/usr/bin:/tmp/ssh/usr/sbin:$PATH
  export LD_LIBRARY_PATH=/tmp/ssh/usr/lib/x86_64-linux-gnu:/tmp/ssh/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e . >> "$setup" 2>&1 \
    || say "pip install -e . failed (see above); this checkout runs from PYTHONPATH"
else
  say "no .gpu-carry/start-sshd.sh here: using the OpenSSH on PATH, installing nothing"
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1

missing=""
for tool in sshd ssh ssh-keygen; do
  command -v "$tool" > /dev/null || [ -x "/usr/sbin/$tool" ] || missing="$missing $tool"
done
[ -z "$missing" ] || { say "not found:$missing (PATH=$PATH): carry .gpu-carry (fetch.sh) or install openssh-server"; exit 1; }
"$PY" -c 'import asyncssh, pytest, orchestrator' >> "$setup" 2>&1 \
  || { say "$PY cannot import asyncssh, pytest or orchestrator (see above): carry the wheels (fetch.sh)"; exit 1; }

soft=$(ulimit -Sn); hard=$(ulimit -Hn)
need=$((41 + 4 * CONCURRENCY))
ulimit -n "$hard" 2> /dev/null || say "could not raise the open-files limit from $soft to its hard limit $hard"
say "open files: soft $soft, hard $hard, now $(ulimit -Sn); orch needs $need at concurrency $CONCURRENCY" \
    "(41 + 4 per host in flight); max user processes $(ulimit -u)"
if [ "$hard" != unlimited ] && [ "$hard" -lt $((need + 2 * CONCURRENCY + 64)) ]; then
  say "the hard open-files limit $hard is too low for concurrency $CONCURRENCY (orch $need + the floors'" \
      "connections): raise it (ulimit -Hn as root) or pass BENCH_ARGS='--concurrency N' with a smaller N"
  exit 1
fi
say "$(nproc) CPUs; $("$PY" -V 2>&1) at $PY; $(ssh -V 2>&1 | head -1); load: $(cut -d' ' -f1-3 /proc/loadavg)"
say "nvidia-smi: $(command -v nvidia-smi || echo 'not on PATH') (the bench's hosts are given none: remote_replay.nogpu_python)"

t_start=$(date +%s)
last_n=0; last_r=0; last_s=0
for size in $SIZES; do
  n=${size%%:*}; r=${size#*:}; [ "$r" = "$size" ] && r=1
  now=$(date +%s); left=$((BUDGET_S - (now - t_start)))
  [ "$left" -gt 10 ] || { say "skipped $n hosts x $r: ${left} s left of BUDGET_S=$BUDGET_S"; continue; }
  est=""  # linear in hosts x repeats from the last size: rough (the set-up does not grow with N)
  [ "$last_n" -gt 0 ] && est=", estimated roughly $((last_s * n * r / (last_n * last_r))) s"
  say "\$ $PY bench/fanout_scale.py --hosts $n --repeat $r ${BENCH_ARGS:-}  (killed after ${left} s$est)"
  t0=$(date +%s)
  # shellcheck disable=SC2086 # BENCH_ARGS: options, split on purpose
  timeout --kill-after=20 "$left" "$PY" bench/fanout_scale.py --hosts "$n" --repeat "$r" ${BENCH_ARGS:-} \
    > "$out/fanout-scale-$n.txt" 2>&1
  rc=$?
  last_s=$(($(date +%s) - t0)); last_n=$n; last_r=$r
  tail -n 12 "$out/fanout-scale-$n.txt"
  say "$n hosts x $r: exit $rc after ${last_s} s (full output: fanout-scale-$n.txt)"
done
say "done in $(($(date +%s) - t_start)) s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
