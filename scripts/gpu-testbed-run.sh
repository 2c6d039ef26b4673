#!/usr/bin/env bash
# The GPU run (issue 5), on the lent H200 machine, from the project root, after ../shared/gpu-testbed/fetch.sh
# filled .gpu-carry/ with the project's dependencies (fetch.sh takes no `-e .`; name them):
#   ../shared/gpu-testbed/fetch.sh .gpu-carry asyncssh 'sqlalchemy>=2' alembic fastapi uvicorn 'pydantic>=2.6' \
#     pydantic-settings typer rich httpx pyyaml orjson Starts a real sshd on 127.0.0.1:2222, trusts its key by fingerprint, and runs orch end to
# end over SSH: doctor (first with the login python3, which lacks torch), deploy, hbm-bandwidth, moe-sweep
# (kimi-k2, bf16, M=1..4096), runs show --json, and the API's /series. Everything lands in $OUT/h200-run.tar.gz.
# `scripts/gpu-testbed-run.sh decode`: the same set-up, then the built-in decode suite (kimi-k2 preset) only.
# `scripts/gpu-testbed-run.sh telemetry` (issues 15, 21): moe-sweep kimi-k2 bf16 with and without GPU telemetry,
# alternated PAIRS times (default 3), and the inner loop (orch run of a one-case echo suite) timed on the GPU host.
# `scripts/gpu-testbed-run.sh multigpu` (on a kind with several GPUs): doctor (every GPU with its UUID), allreduce,
# moe-sweep-ep (experts sharded over all GPUs) and moe-sweep on one GPU for the per-GPU comparison.
# `scripts/gpu-testbed-run.sh quant` (issue 13): hbm-bandwidth, moe-sweep kimi-k2 in bf16, fp8 and int4, the
# overheads suite, bench/quant_kernels.py (the int4 kernel in a plain script next to orch's int4 run, plus a
# torch.profiler kernel table at M=1); everything in $OUT/h200-quant.tar.gz. QUANT_DTYPES (default "bf16 fp8
# int4"), SKIP_OVERHEADS=1 and SKIP_BENCH=1 narrow it (on 2x H200: QUANT_DTYPES= SKIP_BENCH=1 for the all-reduce rows).
set -uo pipefail
mode=${1:-main}
out=${OUT:-/tmp/orch-gpu-out}; mkdir -p "$out"
work=/tmp/orch-gpu; rm -rf "$work"; mkdir -p "$work"
log="$work/console.txt"
say() { echo "\$ $*" | tee -a "$log"; }
# ORCH_GPU_DRY_RUN=1: rehearse on the development machine (sshd already on 127.0.0.1:2222, PY given).
PY=${PY:-/opt/torch/.venv/bin/python3}
if [ -z "${ORCH_GPU_DRY_RUN:-}" ]; then
  bash .gpu-carry/start-sshd.sh 2>&1 | tee -a "$log"
  export PATH=/tmp/ssh/usr/bin:$PATH LD_LIBRARY_PATH=/tmp/ssh/usr/lib/x86_64-linux-gnu:/tmp/ssh/lib/x86_64-linux-gnu
  $PY -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
fi
ORCH="$PY -m orchestrator"
export PYTHONUNBUFFERED=1 ORCH_DB_URL="sqlite:///$work/orch.db" COLUMNS=160
cat > "$work/inventory.yaml" <<INV
groups:
  h200:
    hosts:
      h200-0: {address: 127.0.0.1, port: 2222, user: root}
INV
export ORCH_INVENTORY="$work/inventory.yaml"
fp=$(ssh-keygen -lf "${HOSTKEY_PUB:-/tmp/sshd/host_ed25519.pub}" | awk '{print $2}')
run() { say "orch $*"; $ORCH "$@" 2>&1 | tee -a "$log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$log"; }
if [ "$mode" = multigpu ]; then
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  run hosts trust h200-0 --fingerprint "$fp"
  sed -i "s|user: root}|user: root, python: $PY}|" "$work/inventory.yaml"
  run doctor --hosts h200
  $ORCH doctor --hosts h200 --json > "$work/doctor.json" 2>>"$log"
  step() { say "orch $*"; timeout "${STEP_TIMEOUT:-200}" $ORCH "$@" 2>&1 | tee -a "$log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$log"; }
  step run allreduce --hosts h200 --label "allreduce all GPUs" ${ALLREDUCE_ARGS:-}
  step run moe-sweep-ep --hosts h200 --label "kimi-k2 EP over all GPUs" ${EP_ARGS:-}
  step run moe-sweep --hosts h200 --label "kimi-k2 one GPU" ${MOE_ARGS:-}
  $ORCH runs list --json > "$work/runs.json" 2>>"$log"
  for rid in $($PY -c 'import json,sys; print(" ".join(r["id"] for r in json.load(open(sys.argv[1]))["items"]))' "$work/runs.json"); do
    $ORCH runs show "$rid" --json > "$work/run-$rid.json" 2>>"$log"
  done
  nvidia-smi topo -m > "$work/nvidia-smi-topo.txt" 2>&1
  nvidia-smi > "$work/nvidia-smi.txt" 2>&1
  mkdir -p "$work/spool" && cp -r ~/.orch/runs/* "$work/spool/" 2>/dev/null
  tar czf "$out/h200x2.tar.gz" -C "$work" .
  cp "$log" "$out/console.txt"
  exit 0
fi
if [ "$mode" = quant ]; then
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  run hosts trust h200-0 --fingerprint "$fp"
  sed -i "s|user: root}|user: root, python: $PY}|" "$work/inventory.yaml"
  $ORCH doctor --hosts h200 --json > "$work/doctor.json" 2>>"$log"
  step() { say "orch $*"; timeout "${STEP_TIMEOUT:-240}" $ORCH "$@" 2>&1 | tee -a "$log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$log"; }
  step run hbm-bandwidth --hosts h200 --label "copy roof"
  for dt in ${QUANT_DTYPES-bf16 fp8 int4}; do
    step run moe-sweep --hosts h200 --preset kimi-k2 --set dtype=$dt --label "kimi-k2 $dt H200" ${MOE_ARGS:-}
  done
  [ -n "${SKIP_OVERHEADS:-}" ] || step run overheads --hosts h200 --label "overheads H200" ${OVH_ARGS:-}
  $ORCH runs list --json > "$work/runs.json" 2>>"$log"
  for rid in $($PY -c 'import json,sys; print(" ".join(r["id"] for r in json.load(open(sys.argv[1]))["items"]))' "$work/runs.json"); do
    $ORCH runs show "$rid" --json > "$work/run-$rid.json" 2>>"$log"
  done
  if [ -z "${SKIP_BENCH:-}" ]; then
  int4=$($PY -c 'import json,sys; print([r["id"] for r in json.load(open(sys.argv[1]))["items"] if (r.get("label") or "").startswith("kimi-k2 int4")][0])' "$work/runs.json")
  say "python bench/quant_kernels.py --orch-run run-$int4.json --profile 1"
  timeout 200 $PY bench/quant_kernels.py --orch-run "$work/run-$int4.json" --profile 1 2>&1 | tee -a "$log" "$work/quant-kernels.txt"
  fi
  nvidia-smi topo -m > "$work/nvidia-smi-topo.txt" 2>&1
  nvidia-smi > "$work/nvidia-smi.txt" 2>&1
  mkdir -p "$work/spool" && cp -r ~/.orch/runs/* "$work/spool/" 2>/dev/null
  tar czf "$out/h200-quant.tar.gz" -C "$work" .
  cp "$log" "$out/console.txt"
  exit 0
fi
if [ "$mode" = innerloop ]; then
  # Issue 21 on a GPU host: orch run of a one-case echo suite (first, then cached), with its parts timed apart:
  # orch --help, nvidia-smi's query, the agent's facts, ssh true; python -X importtime of one run.
  run hosts trust h200-0 --fingerprint "$fp"
  sed -i "s|user: root}|user: root, python: $PY}|" "$work/inventory.yaml"
  mkdir -p "$work/suites"
  printf '%s\n' 'name: echo' 'description: one echo' "command: [\"echo\", '{{\"v\": 1}}']" 'params: {}' \
    'parser: json' 'metrics:' '  v: {unit: ms}' > "$work/suites/echo.yaml"
  rm -rf ~/.orch/cache
  tm() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>>"$log"; local rc=$?; t1=$(date +%s.%N)
         echo "$($PY -c "print(round($t1 - $t0, 3))") s exit $rc: $*" | tee -a "$log" "$work/inner-loop.txt"; }
  for i in 1 2 3 4 5 6; do tm $ORCH run echo --hosts h200 --suite-dir "$work/suites"; done
  for i in 1 2 3; do
    tm $ORCH --help
    tm nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv
    tm ssh -p 2222 root@127.0.0.1 true
    tm $PY "$(ls -d ~/.orch/agent/*/ | head -1)agent.pyz" facts
  done
  $PY -X importtime -m orchestrator run echo --hosts h200 --suite-dir "$work/suites" 2> "$work/importtime.txt" > /dev/null
  cp "$work/inner-loop.txt" "$work/importtime.txt" "$out/"
  cp "$log" "$out/console.txt"
  exit 0
fi
if [ "$mode" = telemetry ]; then
  # Issue 15: the same kimi-k2 bf16 sweep with GPU telemetry (--telemetry-ms 100) and without (0), alternated
  # PAIRS times (default 3), to measure the sampling's cost; runs show of a telemetry run; the spools kept.
  # Issue 21: the inner loop on a real GPU host: orch run of a one-case echo suite, first run (torch probed)
  # then cached runs, wall time each.
  run hosts trust h200-0 --fingerprint "$fp"
  sed -i "s|user: root}|user: root, python: $PY}|" "$work/inventory.yaml"
  $ORCH doctor --hosts h200 --json > "$work/doctor.json" 2>>"$log"
  mkdir -p "$work/suites"
  printf '%s\n' 'name: echo' 'description: one echo' "command: [\"echo\", '{{\"v\": 1}}']" 'params: {}' \
    'parser: json' 'metrics:' '  v: {unit: ms}' > "$work/suites/echo.yaml"
  rm -rf ~/.orch/cache
  for i in 1 2 3 4 5 6; do
    t0=$(date +%s.%N); $ORCH run echo --hosts h200 --suite-dir "$work/suites" > /dev/null 2>>"$log"; rc=$?
    t1=$(date +%s.%N); echo "inner loop run $i: exit $rc, $($PY -c "print(round($t1 - $t0, 3))") s" | tee -a "$log" "$work/inner-loop.txt"
  done
  step() { say "orch $*"; timeout "${STEP_TIMEOUT:-240}" $ORCH "$@" 2>&1 | tee -a "$log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$log"; }
  for i in $(seq 1 "${PAIRS:-3}"); do
    step run moe-sweep --hosts h200 --preset kimi-k2 --telemetry-ms 100 --label "telemetry on $i" ${MOE_ARGS:-}
    step run moe-sweep --hosts h200 --preset kimi-k2 --telemetry-ms 0 --label "telemetry off $i" ${MOE_ARGS:-}
  done
  $ORCH runs list --json > "$work/runs.json" 2>>"$log"
  for rid in $($PY -c 'import json,sys; print(" ".join(r["id"] for r in json.load(open(sys.argv[1]))["items"]))' "$work/runs.json"); do
    $ORCH runs show "$rid" --json > "$work/run-$rid.json" 2>>"$log"
  done
  on=$($PY -c 'import json,sys; print([r["id"] for r in json.load(open(sys.argv[1]))["items"] if r.get("label")=="telemetry on 1"][0])' "$work/runs.json")
  off=$($PY -c 'import json,sys; print([r["id"] for r in json.load(open(sys.argv[1]))["items"] if r.get("label")=="telemetry off 1"][0])' "$work/runs.json")
  run runs show "$on"
  run runs compare "$off" "$on"
  nvidia-smi > "$work/nvidia-smi.txt" 2>&1
  mkdir -p "$work/spool" && cp -r ~/.orch/runs/* "$work/spool/" 2>/dev/null
  tar czf "$out/h200-telemetry.tar.gz" -C "$work" .
  cp "$log" "$out/console.txt"
  exit 0
fi
if [ "$mode" = decode ]; then
  run hosts trust h200-0 --fingerprint "$fp"
  sed -i "s|user: root}|user: root, python: $PY}|" "$work/inventory.yaml"
  run run decode --hosts h200 --label "decode kimi-k2 3-layer H200" ${DECODE_ARGS:-}
  rid=$($ORCH runs list --json 2>/dev/null | $PY -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["id"])')
  $ORCH runs show "$rid" --json > "$work/decode-run.json" 2>>"$log"
  mkdir -p "$work/spool" && cp -r ~/.orch/runs/* "$work/spool/" 2>/dev/null
  tar czf "$out/h200-decode.tar.gz" -C "$work" .
  cp "$log" "$out/console.txt"
  exit 0
fi
run doctor --hosts h200
run hosts trust h200-0 --fingerprint "$fp"
run doctor --hosts h200
sed -i "s|user: root}|user: root, python: $PY}|" "$work/inventory.yaml"
say "inventory now sets python: $PY"
run doctor --hosts h200
$ORCH doctor --hosts h200 --json > "$work/doctor.json" 2>>"$log"
run deploy --hosts h200
run run hbm-bandwidth --hosts h200
run run moe-sweep --hosts h200 --label "kimi-k2 bf16 H200" ${MOE_ARGS:-}
rid=$($ORCH runs list --json 2>/dev/null | $PY -c 'import json,sys; d=json.load(sys.stdin); print([r["id"] for r in d["items"] if r["suite"]=="moe-sweep"][0])')
$ORCH runs show "$rid" --json > "$work/moe-run.json" 2>>"$log"
$ORCH serve --port 8765 > "$work/serve.log" 2>&1 & spid=$!
sleep 4
for m in time_ms gbps; do
  $PY -c 'import httpx,sys; print(httpx.get(sys.argv[1], timeout=30).text)' \
    "http://127.0.0.1:8765/api/v1/series?suite=moe-sweep&metric=$m&x=M" > "$work/series-$m.json"
done
kill $spid
nvidia-smi > "$work/nvidia-smi.txt" 2>&1
$PY -c 'import torch; print(torch.__version__, torch.version.cuda)' > "$work/torch.txt" 2>&1
mkdir -p "$work/spool" && cp -r ~/.orch/runs/* "$work/spool/" 2>/dev/null
tar czf "$out/h200-run.tar.gz" -C "$work" .
cp "$log" "$out/console.txt"
