#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck, synccheck and initcheck on every step and the library at
# 1823x781, plus extra shapes given as arguments, plus (with --library-paths) a built-in list that
# reaches every path of the library's dispatch (docs/library.md, "The path table"). Each run is
# one verified launch (build/softmax_profile). Prints one summary line per run; exits 1 on any
# error.
#
#   tools/sanitize.sh [--library-paths] [--typed] [-j N] [SHAPE ...]   (after: cmake --preset default && cmake --build build)
#
# --typed adds the library's 16-bit forward and every-dtype backward kernels: the GoogleTest
# tests that run each of their paths (tests/test_library_typed.cpp), one run a test, as
# "gtest:FILTER" (SOFTMAX_TESTS, default build/tests/softmax_tests).
#
# -j N runs N sanitizer processes at once on the one GPU (default 1); the lines still print in the
# order of the runs.
#
# SHAPE is NAME:ROWSxCOLS or NAME:ROWSxCOLS+XOFF+YOFF, NAME a step or fastsoftmax, e.g.
# step07_persistent:512x1000+1+2: x and y placed XOFF and YOFF floats (0..3) past a 256-byte
# aligned allocation (softmax_profile's X_OFFSET Y_OFFSET), so row starts leave 16-byte
# boundaries; equal offsets keep x and y in the same alignment, different ones do not.
# NAME@noclusters runs with FASTSOFTMAX_NO_CLUSTERS=1 (the library's fallbacks for long rows).
#
# synccheck cannot check clusters of more than 8 CTAs: on an H100 it reported "Missing wait" at
# the first mbarrier arrival of a minimal cluster kernel of 16 CTAs (docs/notes/tuning.md,
# "Sanitizers"), as it does for the library's kernels in clusters of 9-16. The shapes the library
# runs in such clusters (synccheck_skip) get memcheck, racecheck and initcheck and a "synccheck
# skipped" line. Under synccheck the GoogleTest runs get SOFTMAX_TESTS_MAX_CLUSTER=8: their cases
# in larger clusters are not launched, and the line counts them.
# Environment: COMPUTE_SANITIZER (default compute-sanitizer), SOFTMAX_PROFILE (default
# build/softmax_profile), SANITIZE_TOOLS (default "memcheck racecheck synccheck initcheck").
set -uo pipefail
cd "$(dirname "$0")/.."
prof=${SOFTMAX_PROFILE:-build/softmax_profile}
san=${COMPUTE_SANITIZER:-compute-sanitizer}
read -r -a tools <<<"${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}"

# The library's paths as its dispatch picks them on an H100 or H200 (tests/test_library_paths.cpp
# also runs every cluster size and grid group size by force): clusters of 2-16 CTAs of 512 and of
# 128 threads, aligned and not, on many rows and few; clusters with held parts in CTAs of 512 and
# 1024; grid groups with the counter and with tagged words; held grid parts in one round and in
# three; rows longer than the GPU holds (two_pass); the short-row paths (single, pairs, tiles,
# sub_warp, half_warp, strided, warp, block) either side of their rules; and with clusters off.
library_paths() {
  local s=fastsoftmax
  printf '%s
' \
    "$s:200x65536" "$s:200x65539+1+1" "$s:100x98304+2+2" "$s:40x131075+3+3" \
    "$s:2x1048579+1+1" "$s:8x262147" "$s:4x70002+2+2" "$s:16x20000" "$s:20x524288" \
    "$s:1x4400003" "$s:8x1048579+1+1" "$s:3x5000001+2+2" "$s:1x9000001" "$s:4096x64" \
    "$s:65536x127+1+1" "$s:1001x1031+3+3" "$s:256x8192+2+2" \
    "$s:300x32771+1+1" "$s:8x65536+1+2" "$s:65536x128" "$s:65536x36" "$s:32x16384+1+1" \
    "$s:128x4096" "$s:113x262147+1+1" "$s:16x65536" "$s:33x20001+2+2" "$s:48x196608" \
    "$s:1100x20003+1+1" "$s:50x50001+1+1" "$s:16x262147+2+2" "$s:140x20001+1+1" \
    "$s:2200000x1" "$s:262147x1+1+1" "$s:5x1+3+3" "$s:2200000x3+2+2" "$s:400000x7+1+1" \
    "$s:400000x16+1+1" "$s:100x100" "$s:6000x1155+1+1" "$s:10000x131" "$s:1x12729+3+3" \
    "$s:8x32771+1+1" "$s:61x278531+1+1" "$s:32x16384" "$s:64x32768" "$s:260x8192" \
    "$s:96x16387+1+1" "$s:50x16387+2+2" "$s:95x36005+1+1" "$s:24x50001+2+2" "$s:132x2051+3+3" "$s:133x4099+1+1" "$s:4096x2048" \
    "$s:117x36005+2+2" "$s:70x60001+1+1" "$s:75x57000" \
    "$s:16385x256" "$s:9000x200" "$s:7300x300+1+1" "$s:4097x644" "$s:8448x256" \
    "$s:7x33+2+2" "$s:8x1001" "$s:2777x190+1+1" "$s:1000x999+3+3" "$s:6144x257+1+1" \
    "$s:2111x1024" "$s:8448x128" "$s:12000x70" "$s:15000x127+1+1" \
    "$s:10500x105+1+1" "$s:11824x127+3+3" "$s:9289x69+2+2" "$s:11824x85+1+1" \
    "$s:13513x80" "$s:17736x124" "$s:15x1100001+1+1" "$s:81462x2" "$s:6x2+2+2" \
    "$s:262147x2+1+1" "$s:48x700001+2+2" "$s:40x524291+1+1" "$s:96x700001+1+1" "$s:29x262147+1+1" \
    "$s:1x128259+1+1" "$s:4x80003+3+3" "$s:1x151939+1+1" "$s:1x256003+2+2" "$s:384x180003+1+1" \
    "$s:265x24871+1+1" \
    "$s@noclusters:300x32771+1+1" "$s@noclusters:300x20000" "$s@noclusters:3x131075+2+2"
}

# The shapes above that run in clusters of 9-16 CTAs (see the synccheck note at the top).
synccheck_skip=" fastsoftmax:113x262147+1+1 fastsoftmax:48x196608 fastsoftmax:16x65536 fastsoftmax:95x36005+1+1 fastsoftmax:24x50001+2+2 fastsoftmax:50x50001+1+1 fastsoftmax:61x278531+1+1 fastsoftmax:40x524291+1+1 fastsoftmax:1x128259+1+1 fastsoftmax:4x80003+3+3 "

runs=()
jobs=1
for dir in step[0-9][0-9]_*/; do runs+=("${dir%/}:1823x781"); done
runs+=("fastsoftmax:1823x781")
while [ $# -gt 0 ]; do
  case $1 in
    --library-paths) mapfile -t -O "${#runs[@]}" runs < <(library_paths) ;;
    --typed)
      for suite in ForwardBf16 ForwardF16 BackwardBf16 BackwardF16 BackwardF32 \
                   QueuedWordClusters StagedBulkForced; do
        runs+=("gtest:TypedPaths.$suite")
      done
      runs+=("gtest:TypedEdgeValues.*") ;;
    -j) jobs=${2:-}; shift ;;
    -j*) jobs=${1#-j} ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    -*) echo "sanitize.sh: unknown option $1 (see --help)"; exit 2 ;;
    *) runs+=("$1") ;;
  esac
  shift
done
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "sanitize.sh: -j takes a positive number of parallel runs, not '$jobs'"; exit 2
fi

# Check every shape before the first (slow) run.
shape_re='^([A-Za-z0-9_]+)(@noclusters)?:([0-9]+)x([0-9]+)(\+([0-3])\+([0-3]))?$'
for run in "${runs[@]}"; do
  [[ $run == gtest:* ]] && continue
  if ! [[ $run =~ $shape_re ]]; then
    echo "sanitize.sh: bad shape '$run' (NAME[@noclusters]:ROWSxCOLS[+XOFF+YOFF], offsets 0..3)"
    exit 2
  fi
done

command -v "$san" >/dev/null || { echo "sanitize.sh: $san not found (it ships with the CUDA toolkit)"; exit 2; }
[ -x "$prof" ] || { echo "sanitize.sh: $prof not built (cmake --preset default && cmake --build build)"; exit 2; }

# One shape under every tool: its lines on stdout, exit 1 if any tool reported an error.
sanitize_one() {
  local run=$1 failed=0 label cmd=() env_vars=() is_gtest=0
  if [[ $run == gtest:* ]]; then
    is_gtest=1
    label=$(printf '%-40s' "$run")
    cmd=("${SOFTMAX_TESTS:-build/tests/softmax_tests}" --gtest_filter="${run#gtest:}")
  else
    [[ $run =~ $shape_re ]]
    label=$(printf '%-22s %-15s' "${run%%:*}" "${run#*:}")
    [ -n "${BASH_REMATCH[2]}" ] && env_vars=(FASTSOFTMAX_NO_CLUSTERS=1)
    cmd=("$prof" "${BASH_REMATCH[1]}" "${BASH_REMATCH[3]}" "${BASH_REMATCH[4]}")
    [ -n "${BASH_REMATCH[5]}" ] && cmd+=("${BASH_REMATCH[6]}" "${BASH_REMATCH[7]}")
  fi
  local tool out rc summary tests_line=""
  for tool in "${tools[@]}"; do
    if [ "$tool" = synccheck ] && [[ $synccheck_skip == *" $run "* ]]; then
      printf '%s %-10s skipped (clusters of 9-16: see the note at the top)\n' "$label" "$tool"
      continue
    fi
    # GoogleTest cases in clusters of 9-16 are not launched under synccheck (listed as NOT RUN).
    tool_env=(${env_vars[@]+"${env_vars[@]}"})
    [ "$tool" = synccheck ] && [ "$is_gtest" = 1 ] && tool_env+=(SOFTMAX_TESTS_MAX_CLUSTER=8)
    out=$(env ${tool_env[@]+"${tool_env[@]}"} "$san" --tool "$tool" --error-exitcode 3 \
      "${cmd[@]}" 2>&1)
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" <<<"$out" | tail -1)
    # A GoogleTest run must also have passed its tests under the tool.
    if [ "$is_gtest" = 1 ]; then
      tests_line="  ($(grep -oE '[0-9]+ tests? from [0-9]+ test suites? ran|PASSED.*|FAILED.*' \
        <<<"$out" | tr '\n' ' '))"
      not_run=$(grep -c '^\[ NOT RUN  \]' <<<"$out")
      [ "$not_run" -gt 0 ] && tests_line+="  $not_run cases in clusters of 9-16 not run"
      if ! grep -q "PASSED" <<<"$out" || grep -q "FAILED" <<<"$out"; then [ "$rc" -ne 0 ] || rc=1; fi
    fi
    printf '%s %-10s rc=%d  %s%s\n' "$label" "$tool" "$rc" "${summary:-no summary line}" \
      "$tests_line"
    if [ "$rc" -ne 0 ]; then
      failed=1
      tail -20 <<<"$out"
    fi
  done
  return "$failed"
}

failed=0
if [ "$jobs" -eq 1 ]; then
  for run in "${runs[@]}"; do sanitize_one "$run" || failed=1; done
else
  # Each run writes to its own file; they are printed in order once all have finished.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for i in "${!runs[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    ( sanitize_one "${runs[$i]}" >"$tmp/$i.log" 2>&1 || touch "$tmp/$i.failed" ) &
  done
  wait
  for i in "${!runs[@]}"; do
    cat "$tmp/$i.log"
    [ -e "$tmp/$i.failed" ] && failed=1
  done
fi
[ "$failed" -eq 0 ] && echo "sanitize.sh: all runs clean" || echo "sanitize.sh: ERRORS found"
exit "$failed"
