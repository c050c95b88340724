#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Reproduce the charts and tables on your GPU: checks for a GPU, builds, runs the benchmark suite
# and the shape scan, draws docs/img/*.png and rewrites the results tables in README.md and
# docs/*.md.
#
#   tools/reproduce.sh [--with-dram] [--with-torch] [--with-torch-op] [--dram-only] [--second-gpu]
#
#   --with-dram   also measure each step's DRAM traffic and what limits it with Nsight Compute
#                 (tools/dram_traffic.py, tools/profile_limits.sh) and rewrite the dram and limits
#                 tables; same as SOFTMAX_WITH_DRAM=1
#   --with-torch  also time torch.softmax (tools/torch_softmax_bench.py) and overlay it on the
#                 bandwidth chart; same as SOFTMAX_WITH_TORCH=1
#   --with-torch-op  also time the PyTorch package against torch in each dtype, forward and
#                 backward (tools/torch_op_bench.py; the package is built into build/python where
#                 the build finds torch) and rewrite docs/using.md's tables and docs/img/torch_op.png
#   --dram-only   only the Nsight Compute part of --with-dram (after a run without it: the build,
#                 then the DRAM and limits tables), so the two halves can run as separate jobs
#   --second-gpu  a GPU other than the one the chapters quote (the repository's is an H200): the
#                 JSON files and the charts (docs/img/*_<gpu>.png) are written beside the main
#                 ones, and of the tables only the cross-GPU table (gpu-table) is rewritten
#
# Results go to docs/results/bench_<gpu>.json and shape_scan_<gpu>.json, <gpu> from nvidia-smi's
# name ("h200" for "NVIDIA H200"); SOFTMAX_GPU_SLUG=name overrides it. Each JSON records the GPU, driver, CUDA
# versions, the commit (with -dirty when the sources differ from it) and this command. The GPU's
# clocks, temperatures and power during the benchmark go to docs/results/gpu_clocks_<gpu>.csv
# (nvidia-smi, a sample every 5 seconds; summarised by tools/clock_summary.py).
# SOFTMAX_BASELINE=FILE: a benchmark JSON of an earlier run that the library must not fall below
# (bench_summary.py --baseline); its verdict goes to docs/results/bench_summary_<gpu>.txt.
# Exit codes: 0 done; 77 no GPU (nothing was built or run); anything else, the step that failed.
set -euo pipefail
cd "$(dirname "$0")/.."

with_dram=${SOFTMAX_WITH_DRAM:-0}
with_torch=${SOFTMAX_WITH_TORCH:-0}
with_torch_op=0
second_gpu=0
dram_only=0
command_line="tools/reproduce.sh"
for arg in "$@"; do
  case "$arg" in
    --with-dram) with_dram=1; command_line+=" --with-dram" ;;
    --dram-only) with_dram=1; dram_only=1; command_line+=" --dram-only" ;;
    --with-torch) with_torch=1; command_line+=" --with-torch" ;;
    --with-torch-op) with_torch_op=1; command_line+=" --with-torch-op" ;;
    --second-gpu) second_gpu=1; command_line+=" --second-gpu" ;;
    -h|--help) sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reproduce.sh: unknown option '$arg' (see tools/reproduce.sh --help)" >&2; exit 2 ;;
  esac
done
say() { printf '\n== %s\n' "$*"; }

# 1. A GPU, before anything else. The first visible one is the one the programs use.
gpu_name=""
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ] && [ -z "$CUDA_VISIBLE_DEVICES" ]; then
  : # CUDA_VISIBLE_DEVICES set and empty: CUDA sees no GPU, whatever nvidia-smi lists
elif command -v nvidia-smi >/dev/null 2>&1; then
  first_visible=${CUDA_VISIBLE_DEVICES:-}
  first_visible=${first_visible%%,*}
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader ${first_visible:+-i "$first_visible"} \
               2>/dev/null | head -n 1) || gpu_name=""
fi
if [ -z "$gpu_name" ]; then
  echo "reproduce.sh: no NVIDIA GPU found (nvidia-smi is missing or lists no GPU)." >&2
  echo "  The results are measurements of a GPU: nothing was built or run. (exit code 77)" >&2
  exit 77
fi

# 2. The tools the steps below need, checked before the (long) build.
missing=()
for tool in cmake ninja python3; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import matplotlib' 2>/dev/null; then
  missing+=("python3 matplotlib (pip install matplotlib)")
fi
if { [ "$with_torch" = 1 ] || [ "$with_torch_op" = 1 ]; } && ! python3 -c 'import torch' 2>/dev/null; then
  missing+=("python3 torch, for --with-torch (pip install torch)")
fi
ncu=""
if [ "$with_dram" = 1 ]; then
  ncu=${NCU:-$(command -v ncu || true)}
  [ -z "$ncu" ] && [ -x /usr/local/cuda/bin/ncu ] && ncu=/usr/local/cuda/bin/ncu
  [ -z "$ncu" ] && missing+=("ncu (Nsight Compute, for --with-dram; set NCU=/path/to/ncu)")
fi
if [ "${#missing[@]}" -gt 0 ]; then
  printf 'reproduce.sh: missing: %s\n' "${missing[@]}" >&2
  exit 2
fi

slug=${SOFTMAX_GPU_SLUG:-$(python3 -c 'import sys; sys.path.insert(0, "tools"); import plot_results
print(plot_results.gpu_slug(sys.argv[1]))' "$gpu_name")}
# The commit, -dirty when anything but generated output (docs/results, docs/img, Markdown) differs
# from it (plot_results.git_commit); "unknown" outside a git checkout. It holds no ',' or '=',
# which --benchmark_context would take for separators.
commit=$(python3 -c 'import sys; sys.path.insert(0, "tools"); import plot_results
print(plot_results.git_commit())')
results=docs/results
bench_json=$results/bench_$slug.json
torch_json=$results/torch_$slug.json
dram_json=$results/dram_traffic_$slug.json
echo "GPU: $gpu_name (results: $bench_json); commit $commit"

# 3. Build.
say "configure and build (cmake --preset default; cmake --build --preset default)"
cmake --preset default
cmake --build --preset default

scan_json=$results/shape_scan_$slug.json
clocks_csv=$results/gpu_clocks_$slug.csv

if [ "$dram_only" = 0 ]; then
# 4. The benchmark, into a temporary file first so a failed run leaves the previous JSON alone.
#    Meanwhile nvidia-smi logs the GPU's clocks, temperatures, power and clock-event reasons every
#    5 seconds into $results/gpu_clocks_<gpu>.csv: a kernel that waits on its own latencies slows
#    with the SM clock where a memcpy does not, so the ratios of a run depend on it. (Sampled
#    twice a second, the log came with more timings whose median was 5% over their minimum: 11 of
#    3293 against 2 in the run before, so it samples seldom.)
say "benchmark (build/bench/softmax_bench, a few minutes)"
mkdir -p "$results"
tmp_json=$(mktemp "$results/.bench_$slug.XXXXXX")
clocks_csv=$results/gpu_clocks_$slug.csv
clock_fields=timestamp,clocks.sm,clocks.mem,temperature.gpu,temperature.memory,power.draw
logger_pid=""
stop_logger() {
  [ -n "$logger_pid" ] || return 0
  kill "$logger_pid" 2>/dev/null || true
  wait "$logger_pid" 2>/dev/null || true
  logger_pid=""
}
trap 'stop_logger; rm -f "$tmp_json"' EXIT
can_log() {
  nvidia-smi --query-gpu="$1" --format=csv ${first_visible:+-i "$first_visible"} >/dev/null 2>&1
}
# The clock-event reasons field is newer than some drivers: logged where nvidia-smi knows it.
if can_log "$clock_fields,clocks_event_reasons.active"; then
  clock_fields+=,clocks_event_reasons.active
fi
if can_log "$clock_fields"; then
  nvidia-smi --query-gpu="$clock_fields" --format=csv -l 5 \
    ${first_visible:+-i "$first_visible"} > "$clocks_csv" 2>/dev/null &
  logger_pid=$!
else
  echo "nvidia-smi cannot report $clock_fields here: no clock log"
fi
rc=0
build/bench/softmax_bench --benchmark_out="$tmp_json" --benchmark_out_format=json \
  --benchmark_context="commit=$commit,command=$command_line" || rc=$?
stop_logger
if [ -s "$clocks_csv" ]; then
  python3 tools/clock_summary.py "$clocks_csv" || true
fi
if [ "$rc" -eq 77 ]; then
  echo "reproduce.sh: softmax_bench found no usable GPU (exit code 77); nothing measured" >&2
  exit 77
elif [ "$rc" -ne 0 ]; then
  echo "reproduce.sh: softmax_bench failed (exit code $rc)" >&2
  exit "$rc"
fi
mv "$tmp_json" "$bench_json"
chmod 644 "$bench_json"   # mktemp made it private

# 5. Optional: torch.softmax, timed the same way.
extra=()
if [ "$with_torch" = 1 ]; then
  say "torch.softmax (tools/torch_softmax_bench.py)"
  python3 tools/torch_softmax_bench.py --out "$torch_json" --commit "$commit" --command "$command_line"
  extra=(--extra "$torch_json")
fi

# 6. Charts and tables.
say "charts and tables (tools/plot_results.py)"
plot_args=()
[ "$second_gpu" = 1 ] && plot_args=(--second-gpu)
python3 tools/plot_results.py "$bench_json" ${extra[@]+"${extra[@]}"} ${plot_args[@]+"${plot_args[@]}"}

# 7. The library on shapes drawn at random away from the sweeps (tools/shape_scan.cpp), beside the
#    final lesson, cuDNN and memcpy: its tables in docs/library.md (the main GPU only).
say "shape scan (build/softmax_shape_scan, about a minute)"
# The scan writes its JSON only when every shape verified, so a failed run leaves the last one.
SOFTMAX_COMMIT="$commit" build/softmax_shape_scan --json "$scan_json"
[ "$second_gpu" = 1 ] || python3 tools/scan_table.py "$scan_json"
fi  # dram_only

# 7b. Optional: the PyTorch package against torch (built by the step above into build/python).
if [ "$with_torch_op" = 1 ] && [ "$dram_only" = 0 ]; then
  say "the PyTorch package (tools/torch_op_bench.py)"
  [ -d build/python/fastsoftmax ] || { echo "reproduce.sh: build/python has no fastsoftmax package (the build found no torch with CUDA)" >&2; exit 2; }
  PYTHONPATH=build/python python3 tools/torch_op_bench.py --out "$results/torch_op_$slug.json" \
    --commit "$commit" --command "$command_line"
  [ "$second_gpu" = 1 ] || python3 tools/torch_op_table.py "$results/torch_op_$slug.json"
fi

# 8. Optional: measured DRAM traffic against the model.
if [ "$with_dram" = 1 ]; then
  say "DRAM traffic (tools/dram_traffic.py, Nsight Compute)"
  dram_args=()
  [ "$second_gpu" = 1 ] && dram_args=(--no-tables)
  python3 tools/dram_traffic.py --ncu "$ncu" --out "$dram_json" --commit "$commit" \
    --command "$command_line" ${dram_args[@]+"${dram_args[@]}"}
  say "what limits each step (tools/profile_limits.sh, Nsight Compute)"
  NCU="$ncu" tools/profile_limits.sh
  [ "$second_gpu" = 1 ] || python3 tools/limits_table.py "$results/ncu_limits_$slug.csv"
fi

# 9. The verdict on the floors and tolerances (tools/bench_summary.py), from the files just written.
[ "$dram_only" = 1 ] || {
say "verdict (tools/bench_summary.py)"
summary_args=(--scan "$scan_json")
[ "$with_torch" = 1 ] && summary_args+=(--extra "$torch_json")
[ -n "${SOFTMAX_BASELINE:-}" ] && summary_args+=(--baseline "$SOFTMAX_BASELINE")
python3 tools/bench_summary.py "$bench_json" "${summary_args[@]}" \
  | tee "$results/bench_summary_$slug.txt" || true
}

say "done"
echo "  benchmark JSON:  $bench_json"
echo "  shape scan JSON: $scan_json"
if [ -s "$clocks_csv" ]; then echo "  GPU clock log:   $clocks_csv"; fi
if [ "$with_torch" = 1 ]; then echo "  torch JSON:      $torch_json"; fi
if [ "$with_dram" = 1 ]; then
  echo "  DRAM JSON:       $dram_json"
  echo "  ncu limits CSV:  $results/ncu_limits_$slug.csv"
fi
if [ "$second_gpu" = 1 ]; then
  echo "  charts:          docs/img/bandwidth_$slug.png, docs/img/staircase_$slug.png"
  echo "  tables:          the gpu-table blocks only"
else
  echo "  charts:          docs/img/bandwidth.png, docs/img/staircase.png"
  echo "  tables:          the marked blocks in README.md and docs/*.md (listed above)"
fi
echo "  review with git diff; regenerate tables only: python3 tools/plot_results.py $bench_json"
