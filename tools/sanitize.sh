#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck, synccheck and initcheck on every step at 1823x781, plus
# extra shapes given as arguments, plus (with --step07-paths, --step08-paths) a built-in list that
# reaches every dispatch path of step07 or step08. Each run is one verified launch (build/softmax_profile). Prints one
# summary line per run; exits 1 on any error.
#
#   tools/sanitize.sh [--step07-paths] [--step08-paths] [SHAPE ...]   (after: cmake --preset default && cmake --build build)
#
# SHAPE is STEP:ROWSxCOLS or STEP:ROWSxCOLS+XOFF+YOFF, e.g. step07_persistent:512x1000+1+2: x and y
# placed XOFF and YOFF floats (0..3) past a 256-byte aligned allocation (softmax_profile's
# X_OFFSET Y_OFFSET), so row starts leave 16-byte boundaries; equal offsets keep x and y in the same
# alignment, different ones do not. STEP@noclusters runs with SOFTMAX_NO_CLUSTERS=1 (step08 on
# step07's paths).
#
# synccheck cannot check clusters of 16 CTAs: on an H100 it reports "Missing wait" at the first
# mbarrier arrival of build/softmax_mbarrier_probe 16 as well, a minimal kernel (and then ends it
# in an illegal address, which plain and memcheck runs do not). So --step08-paths runs synccheck
# on the probe in clusters of 8, 9, 12 and 16 (8 must be clean; what it says of the others is
# printed, not counted). On an H100 the probe is clean at 9 and 12 too, but step08's own kernel
# in clusters of 12 (48x196608) gets the same report at its stage barrier's first arrival, and
# (in change 28's first runs, whose log was not kept) its small clusters of 9 (95x36005) at the
# exchange's first st.async to another CTA's barrier, code that is clean under synccheck in
# clusters of up to 8; so the shapes that step08 runs in clusters of more than 8 on an H100
# (synccheck_skip below) get memcheck, racecheck and initcheck and a "synccheck skipped" line.
# Environment: COMPUTE_SANITIZER (default compute-sanitizer), SOFTMAX_PROFILE (default
# build/softmax_profile), MBARRIER_PROBE (default build/softmax_mbarrier_probe), SANITIZE_TOOLS
# (default "memcheck racecheck synccheck initcheck").
set -uo pipefail
cd "$(dirname "$0")/.."
prof=${SOFTMAX_PROFILE:-build/softmax_profile}
san=${COMPUTE_SANITIZER:-compute-sanitizer}
read -r -a tools <<<"${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}"

# step07_persistent's paths by S, the 16-byte slots a row needs (N / 4 for N % 4 == 0 and
# 16-byte aligned x and y, else at most floor((N + 6) / 4)): (a) S <= 32 sub-warp groups (4 or 8
# lanes of 2-4 slots each from S = 5 on matrices of 1.5 waves of one-slot groups or more), except
# (a') unaligned rows of 17..131 floats on matrices of 2.5 tiles per SM or more, tiles of rows
# through shared memory with 2, 4, 8 or 16 lanes a row; (b) S <= 288 a warp
# per row (two kernels, by float4 per lane; (a) and (b) launch one row per group for matrices of
# 1.5 waves of blocks or more); (c) S <= 4096 a block per row in registers (128
# threads up to S = 2048, then 256); (d) the row cached in shared memory (up to about 58,000
# floats on an H100); (e) two passes over global memory; (f) x and y in different alignments: the
# scalar fallback, any N. Each of (a)-(e) aligned, with N % 4 != 0, and with x and y offset alike.
step07_paths() {
  local s=step07_persistent
  printf '%s\n' \
    "$s:4096x4" "$s:4096x64" "$s:4096x61" "$s:4096x64+1+1" "$s:4096x30+3+3" \
    "$s:4096x127" "$s:1001x97+2+2" "$s:1001x128+1+1" "$s:1001x131+3+3" \
    "$s:65536x128" "$s:65536x61+1+1" "$s:16384x256" "$s:40000x1031+2+2" \
    "$s:65536x19+2+2" "$s:65536x45+3+3" "$s:32768x127+1+1" "$s:20000x131+1+1" \
    "$s:65536x64+1+1" "$s:65536x32" "$s:65536x64" "$s:65536x100" \
    "$s:1001x256" "$s:1001x512" "$s:1001x1152" "$s:1001x1031" "$s:1001x1024+1+1" \
    "$s:512x1155+3+3" "$s:512x2048" "$s:512x1157" "$s:512x2045+2+2" \
    "$s:256x4096" "$s:256x16384" "$s:256x8191" "$s:256x8192+2+2" "$s:256x16381+1+1" \
    "$s:8x40000" "$s:8x40001" "$s:8x40000+3+3" \
    "$s:4x70000" "$s:4x70002" "$s:4x70000+1+1" \
    "$s:1024x61+1+2" "$s:512x1000+1+2" "$s:64x20000+1+2" "$s:4x70001+1+2" "$s:256x4096+0+3"
}

# step08_cluster's own paths as its launcher picks them on an H100 (tests/test_step08.cpp runs
# every cluster size and grid group size by force): (g) clusters of 2, 4, 6, 8, 12 and 16 CTAs on
# many rows, aligned and not, and of 3-8 CTAs on few rows, and a cluster per two rows, more than
# fit at once, on rows for 8 or more rounds (1100x20003 in clusters of 2, 113x262147 of 16);
# (h) grid groups for few rows of more than 8 CTAs' worth and rows of more than 16; (i) held parts
# for few rows that (h) would take in two or more rounds, and in CTAs of 1024 threads for rows
# longer than (h) holds on the whole GPU, in one round and in three; rows longer than the GPU holds with its stages too
# (step07's path e); a few of step07's paths as step08 copied them, and path (d) with clusters
# turned off. Change 17's choices: clusters narrowed to one round (50x50001), grid groups just past
# one round of clusters (16x262147), path (d) past one round of clusters of 2 (140x20001), tiles
# with one lane a row (2200000x3, 400000x7, 400000x16 off its boundary), one row per group on a
# small matrix (100x100) and the persistent grid above that size (6000x1155, 10000x131). Change
# 18's path (a1), rows of one float: 2200000x1, 262147x1 and 5x1 (its head and tail only); and
# its clusters of CTAs of 128 threads for small matrices of few rows: 32x16384, 16x20000 and
# 33x20001 above, 1x12729 and 8x32771 (8 float4 a thread). Change 21's exchange of tagged words
# runs in (i) and in (h) up to four rows a group (2x1048579, 8x262147, 20x524288, 16x262147);
# 48x700001 keeps the counter, (h) in groups of 43 over eight rounds (61x278531, which did until
# change 44, now takes (g) with held parts in clusters of 9). Change 24's small clusters
# with every warp's pair exchanged: parts of exactly 128 threads' float4 with the late clusters
# staggered (32x16384, 64x32768), aligned rows in clusters of 3 (260x8192), rows off their
# boundary, staggered (96x16387, 256x8192 and 32x16384 above). Change 25's path (c) with one
# barrier, at most one row an SM (128x4096 above, 132x2051 off its boundary), and its two block
# reductions one row past that on an H100 (133x4099 off its boundary, 4096x2048). Change 27's
# stages of 1 MiB: 2 (32x16384), 3 (50x16387, its last stage shorter), 6 (96x16387) and 8
# (64x32768, 256x8192). Change 28's clusters of 9-16 CTAs of 128 threads: 16x65536 above (K = 16,
# exact parts), 95x36005 (K = 9) and 24x50001 (K = 16) off their boundary. Change 29's path (d)
# past one round of clusters of 3 (117x36005 off its boundary) and change 30's path (i) in 3 CTAs a
# row past one round of clusters of 4 (70x60001 off its boundary, 75x57000). A warp per aligned row
# (path b) at 2, 3 and 6 float4 a lane, its last pack full or part-filled, one row a warp
# (16385x256, 8448x256) and the persistent grid with the next row in flight (9000x200, 7300x300 off
# its boundary, 4097x644).
# Change 32's path (b4), 4-byte accesses a warp per row on matrices loaded at once: 7x33, 8x1001,
# 2777x190 and 1000x999, on and off their boundary; change 33's reach of it, under 64 KB of input
# an SM with a warp resident for every row: 6144x257 off its boundary, 2111x1024, 8448x128 (one
# wave of its warps). Change 35's groups of 16 lanes a row on unaligned rows of 69-131 floats
# around one wave of their blocks: 12000x70, and 15000x127 off its boundary. Change 36's (b4) on
# unaligned rows of 86-131 floats past its own reach below that band: 10500x105 and 11824x127,
# both off their boundary. Change 37's part of the 16-lane band at 69-85 floats: 9289x69 (its
# lower edge) and 11824x85 (its top), off their boundary. Change 38's 16-lane groups on aligned
# rows of 72-124 floats around one wave: 13513x80 and 17736x124 (its edges). Change 42's tagged
# pairs over many rows where at most three groups of (h) fit: 15x1100001 off its boundary (three
# groups over five rows each). Change 43's path (a2), rows of two floats as one vector: 81462x2,
# 6x2 two floats off the boundary (a row in the head and one in the tail), and 262147x2 one float
# off it, which keeps path (a) (129 tiles, under the tiles' start). Change 44's (g) with held
# parts, a cluster per row: 61x278531 (clusters of 9) and 40x524291 (of 16) in CTAs of 512,
# 96x700001 in clusters of 16 CTAs of 1024, all off their boundary. Change 45's (i) in one round
# past two rounds of clusters: 29x262147 (8 CTAs a row) off its boundary. Change 52's (g) with
# held parts on 384 rows or more of 10-16 CTAs' worth of (g): 384x180003 (clusters of 6) off its
# boundary. Change 53's every cluster that fits where the last round would be at most half full:
# 265x24871 (132 clusters of 2, one of them taking three rows) off its boundary.
step08_paths() {
  local s=step08_cluster
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

# The shapes above that an H100 runs in clusters of 9-16 CTAs (see the synccheck note at the top):
# 16x65536, 95x36005, 24x50001 and 50x50001 in clusters of 16, 9, 16 and 16 CTAs of 128 threads
# (change 28);
# 113x262147 in clusters of 16, 48x196608 in clusters of 12; 61x278531 and 40x524291, (g) with
# held parts in clusters of 9 and 16 CTAs of 512 (change 44: "Missing wait" at the exchange's
# first arrival in clusters of 9; its kernel in clusters of 4 and 8, forced through
# build/softmax_step08_splits, and in clusters of 16 CTAs of 1024 (96x700001) is clean).
# 1x128259 and 4x80003: few rows in clusters of 16 CTAs of 512 (change 47), the kernel of
# 113x262147.
synccheck_skip=" step08_cluster:113x262147+1+1 step08_cluster:48x196608 step08_cluster:16x65536 step08_cluster:95x36005+1+1 step08_cluster:24x50001+2+2 step08_cluster:50x50001+1+1 step08_cluster:61x278531+1+1 step08_cluster:40x524291+1+1 step08_cluster:1x128259+1+1 step08_cluster:4x80003+3+3 "

runs=()
probe_runs=
for dir in step[0-9][0-9]_*/; do runs+=("${dir%/}:1823x781"); done
for arg in "$@"; do
  case $arg in
    --step07-paths) mapfile -t -O "${#runs[@]}" runs < <(step07_paths) ;;
    --step08-paths) mapfile -t -O "${#runs[@]}" runs < <(step08_paths); probe_runs=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    -*) echo "sanitize.sh: unknown option $arg (see --help)"; exit 2 ;;
    *) runs+=("$arg") ;;
  esac
done

# Check every shape before the first (slow) run.
shape_re='^([A-Za-z0-9_]+)(@noclusters)?:([0-9]+)x([0-9]+)(\+([0-3])\+([0-3]))?$'
for run in "${runs[@]}"; do
  if ! [[ $run =~ $shape_re ]]; then
    echo "sanitize.sh: bad shape '$run' (STEP[@noclusters]:ROWSxCOLS[+XOFF+YOFF], offsets 0..3)"
    exit 2
  fi
done

command -v "$san" >/dev/null || { echo "sanitize.sh: $san not found (it ships with the CUDA toolkit)"; exit 2; }
[ -x "$prof" ] || { echo "sanitize.sh: $prof not built (cmake --preset default && cmake --build build)"; exit 2; }

failed=0
for run in "${runs[@]}"; do
  [[ $run =~ $shape_re ]]
  step=${BASH_REMATCH[1]} rows=${BASH_REMATCH[3]} cols=${BASH_REMATCH[4]}
  env_vars=()
  [ -n "${BASH_REMATCH[2]}" ] && env_vars=(SOFTMAX_NO_CLUSTERS=1)
  offsets=()
  [ -n "${BASH_REMATCH[5]}" ] && offsets=("${BASH_REMATCH[6]}" "${BASH_REMATCH[7]}")
  shape=${run#*:}
  for tool in "${tools[@]}"; do
    if [ "$tool" = synccheck ] && [[ $synccheck_skip == *" $run "* ]]; then
      printf '%-22s %-15s %-10s skipped (clusters of 9-16: see mbarrier_probe below)\n' \
        "${run%%:*}" "$shape" "$tool"
      continue
    fi
    out=$(env ${env_vars[@]+"${env_vars[@]}"} "$san" --tool "$tool" --error-exitcode 3 "$prof" \
      "$step" "$rows" "$cols" ${offsets[@]+"${offsets[@]}"} 2>&1)
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" <<<"$out" | tail -1)
    printf '%-22s %-15s %-10s rc=%d  %s\n' "${run%%:*}" "$shape" "$tool" "$rc" \
      "${summary:-no summary line}"
    if [ "$rc" -ne 0 ]; then
      failed=1
      tail -20 <<<"$out"
    fi
  done
done
if [ -n "$probe_runs" ] && [[ " ${tools[*]} " == *" synccheck "* ]]; then
  probe=${MBARRIER_PROBE:-build/softmax_mbarrier_probe}
  for k in 8 9 12 16; do
    out=$("$san" --tool synccheck --error-exitcode 3 "$probe" "$k" 1 2>&1)
    rc=$?
    summary=$(grep -E "ERROR SUMMARY" <<<"$out" | tail -1)
    printf '%-22s %-15s %-10s rc=%d  %s\n' mbarrier_probe "clusters of $k" synccheck "$rc" \
      "${summary:-no summary line}"
    if [ "$k" = 8 ] && [ "$rc" -ne 0 ]; then
      failed=1
      tail -20 <<<"$out"
    elif [ "$k" != 8 ]; then
      grep -E "Barrier error|Missing wait|illegal|mbarrier_probe:" <<<"$out" | head -4 | sed 's/^/  (not counted) /'
    fi
  done
fi
[ "$failed" -eq 0 ] && echo "sanitize.sh: all runs clean" || echo "sanitize.sh: ERRORS found"
exit "$failed"
