#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What limits each step: Nsight Compute metrics for one launch of every step and the library at
# each shape (default
# 4096x1024, 4096x4096 and 4096x16384, the staircase's row lengths): duration, DRAM and SM
# throughput (% of peak), warp instructions executed, issue slots busy, achieved occupancy, the
# launch's registers, block and grid size, and the warp stall reasons (cycles a warp spends
# stalled per instruction it issues, by reason). Writes a CSV (default
# docs/results/ncu_limits_<gpu>.csv) whose header names the GPU, driver, ncu and the command;
# tools/limits_table.py turns it into the chapters' limits tables. With the default shapes,
# step08_cluster and the library are also profiled at 2048x65536 and 64x262144 (a long-rows and a
# few-rows shape), since at the staircase's shapes step08 runs step07's kernels, not its cluster.
#
#   tools/profile_limits.sh [ROWSxCOLS ...]   (after: cmake --preset default && cmake --build build)
set -euo pipefail
cd "$(dirname "$0")/.."
shapes=("$@")
cluster_shapes=()
if [ "${#shapes[@]}" -eq 0 ]; then
  shapes=(4096x1024 4096x4096 4096x16384)
  cluster_shapes=(2048x65536 64x262144)
fi
for shape in "${shapes[@]}"; do
  [[ $shape =~ ^[0-9]+x[0-9]+$ ]] || { echo "profile_limits.sh: bad shape '$shape' (ROWSxCOLS)"; exit 2; }
done
ncu=${NCU:-ncu}
command -v "$ncu" >/dev/null || { echo "profile_limits.sh: ncu not found"; exit 2; }
[ -x build/softmax_profile ] || { echo "profile_limits.sh: build/softmax_profile not built"; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "profile_limits.sh: no GPU"; exit 77; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
slug=${SOFTMAX_GPU_SLUG:-$(python3 -c 'import sys; sys.path.insert(0, "tools"); import plot_results
print(plot_results.gpu_slug(sys.argv[1]))' "$gpu")}
out=${OUT_CSV:-docs/results/ncu_limits_${slug:-gpu}.csv}
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__inst_issued.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__block_size,launch__grid_size,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
stalls='regex:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio$'
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
  echo "# $gpu, driver $driver, $("$ncu" --version | tail -1)"
  echo "# command: tools/profile_limits.sh ${shapes[*]}${cluster_shapes[*]+ (step08_cluster and fastsoftmax also ${cluster_shapes[*]})}  (ncu --clock-control none --metrics $metrics,$stalls)"
  echo "step,shape,kernel,metric,unit,value"
  for shape in "${shapes[@]}" ${cluster_shapes[@]+"${cluster_shapes[@]}"}; do
    steps=$(ls -d step[0-9][0-9]_*/ | tr -d /)
    [[ " ${cluster_shapes[*]-} " == *" $shape "* ]] && steps=step08_cluster
    for step in $steps fastsoftmax; do
      "$ncu" --clock-control none --csv --print-units base --metrics "$metrics,$stalls" \
        build/softmax_profile "$step" "${shape%x*}" "${shape#*x}" >"$tmp" 2>&1 ||
        { echo "ncu failed on $step $shape" >&2; tail -5 "$tmp" >&2; exit 1; }
      # ncu's CSV: "ID","Process ID","Process Name","Host Name","Kernel Name",...,"Metric Name","Metric Unit","Metric Value"
      python3 - "$step" "$shape" "$tmp" <<'PY'
import csv, sys
step, shape, path = sys.argv[1:4]
lines = [l for l in open(path) if l.startswith('"')]
for row in csv.DictReader(lines):
    name = row.get("Kernel Name", "?").split("(")[0]
    print(f'{step},{shape},"{name}",{row["Metric Name"]},{row["Metric Unit"]},{row["Metric Value"].replace(",", "")}')
PY
    done
  done
} >"$out"
echo "wrote $out"
