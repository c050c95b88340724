#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck and synccheck on every step at 1823x781, plus extra shapes
# given as STEP:ROWSxCOLS arguments (e.g. one shape per dispatch path of step07). Each run is one
# verified launch (build/softmax_profile). Prints one summary line per run; exits 1 on any error.
#
#   tools/sanitize.sh [STEP:ROWSxCOLS ...]        (after: cmake --preset default && cmake --build build)
set -uo pipefail
cd "$(dirname "$0")/.."
prof=build/softmax_profile
san=${COMPUTE_SANITIZER:-compute-sanitizer}
command -v "$san" >/dev/null || { echo "sanitize.sh: $san not found (it ships with the CUDA toolkit)"; exit 2; }
[ -x "$prof" ] || { echo "sanitize.sh: $prof not built (cmake --preset default && cmake --build build)"; exit 2; }

runs=()
for dir in step[0-9][0-9]_*/; do runs+=("${dir%/}:1823x781"); done
runs+=("$@")

failed=0
for run in "${runs[@]}"; do
  step=${run%%:*}
  shape=${run#*:}
  for tool in memcheck racecheck synccheck; do
    out=$("$san" --tool "$tool" --error-exitcode 3 "$prof" "$step" "${shape%x*}" "${shape#*x}" 2>&1)
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" <<<"$out" | tail -1)
    printf '%-22s %-11s %-10s rc=%d  %s\n' "$step" "$shape" "$tool" "$rc" "${summary:-no summary line}"
    if [ "$rc" -ne 0 ]; then
      failed=1
      tail -20 <<<"$out"
    fi
  done
done
[ "$failed" -eq 0 ] && echo "sanitize.sh: all runs clean" || echo "sanitize.sh: ERRORS found"
exit "$failed"
