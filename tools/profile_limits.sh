#!/usr/bin/env bash
# What limits each step: Nsight Compute metrics for one launch of every step at ROWSxCOLS
# (default 4096x4096): duration, DRAM throughput (% of peak), achieved occupancy, registers per
# thread, block size, grid size, and the compute (SM) throughput. Writes a CSV (default
# docs/results/ncu_limits_<gpu>.csv) whose header names the GPU, driver, ncu and the command.
#
#   tools/profile_limits.sh [ROWS COLS]      (after: cmake --preset default && cmake --build build)
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-4096}
cols=${2:-4096}
ncu=${NCU:-ncu}
command -v "$ncu" >/dev/null || { echo "profile_limits.sh: ncu not found"; exit 2; }
[ -x build/softmax_profile ] || { echo "profile_limits.sh: build/softmax_profile not built"; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "profile_limits.sh: no GPU"; exit 77; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
slug=${SOFTMAX_GPU_SLUG:-$(echo "$gpu" | tr 'A-Z' 'a-z' | grep -oE 'h100|h200|a100|l40s|[a-z][0-9]{2,4}' | head -1)}
out=${OUT_CSV:-docs/results/ncu_limits_${slug:-gpu}.csv}
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__block_size,launch__grid_size,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
tmp=$(mktemp)
{
  echo "# $gpu, driver $driver, $("$ncu" --version | tail -1)"
  echo "# command: tools/profile_limits.sh $rows $cols  (ncu --clock-control none --metrics $metrics)"
  echo "step,kernel,metric,unit,value"
  for dir in step[0-9][0-9]_*/; do
    step=${dir%/}
    "$ncu" --clock-control none --csv --print-units base --metrics "$metrics" \
      build/softmax_profile "$step" "$rows" "$cols" >"$tmp" 2>&1 || { echo "ncu failed on $step" >&2; tail -5 "$tmp" >&2; exit 1; }
    # ncu's CSV: "ID","Process ID","Process Name","Host Name","Kernel Name",...,"Metric Name","Metric Unit","Metric Value"
    python3 - "$step" "$tmp" <<'PY'
import csv, sys
step, path = sys.argv[1], sys.argv[2]
lines = [l for l in open(path) if l.startswith('"')]
for row in csv.DictReader(lines):
    name = row.get("Kernel Name", "?").split("(")[0]
    print(f'{step},"{name}",{row["Metric Name"]},{row["Metric Unit"]},{row["Metric Value"].replace(",", "")}')
PY
  done
} >"$out"
rm -f "$tmp"
echo "wrote $out"
