#!/usr/bin/env bash
# Record what orch's fleet view and telemetry parse, as this machine's nvidia-smi prints it, into DIR
# (default $OUT or ./nvidia-smi-recorded): the field list, the fleet query, a -lms telemetry stream while a
# GPU is busy (torch matmuls in PYTHON, default /opt/torch/.venv/bin/python3), compute apps, NVLink status.
set -u
out=${1:-${OUT:-./nvidia-smi-recorded}}
py=${PYTHON:-/opt/torch/.venv/bin/python3}
mkdir -p "$out"
base=name,uuid,driver_version,memory.total,clocks.max.sm,clocks.max.mem,ecc.mode.current,pci.bus_id
fleet=vbios_version,persistence_mode,power.limit,power.default_limit,clocks.applications.graphics,clocks.applications.memory,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,mig.mode.current,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,retired_pages.pending,remapped_rows.pending
tel=index,uuid,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,utilization.gpu,utilization.memory,clocks_event_reasons.active
{ nvidia-smi --version; echo "rc=$?"; } > "$out/version.txt" 2>&1
{ nvidia-smi --help-query-gpu; echo "rc=$?"; } > "$out/help-query-gpu.txt" 2>&1
{ nvidia-smi --query-gpu=$base,$fleet --format=csv; echo "rc=$?"; } > "$out/fleet.csv" 2>&1
{ nvidia-smi --query-gpu=clocks_throttle_reasons.active --format=csv; echo "rc=$?"; } > "$out/throttle-old-name.txt" 2>&1
{ nvidia-smi nvlink -s; echo "rc=$?"; } > "$out/nvlink-s.txt" 2>&1
"$py" -c '
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
t0 = time.time()
while time.time() - t0 < 4:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
' &
load=$!
sleep 1
nvidia-smi --query-gpu=$tel --format=csv,noheader,nounits -lms 100 > "$out/lms-busy.csv" 2>&1 &
smi=$!
sleep 0.5
{ nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits; echo "rc=$?"; } > "$out/compute-apps.txt" 2>&1
sleep 2
kill $smi; wait $load
nvidia-smi --query-gpu=$tel --format=csv -lms 100 > "$out/lms-idle-header.csv" 2>&1 &
smi=$!; sleep 1; kill $smi
ls -la "$out"
