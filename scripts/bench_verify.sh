#!/usr/bin/env bash
# `b2fs verify` of a 1 GiB sound frame against python-blosc2 decompressing every chunk of it
# (nthreads=2), in the same run, alternating (issue 22). Both read the frame from the page
# cache (a warm-up read of each runs first). Prints each round and the best of each side.
#   bash scripts/bench_verify.sh [ROUNDS] [MIB]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
mib=${2:-1024}
py=${B2FS_PYTHON:-$PWD/.venv/bin/python}
cargo build --release --quiet --bin b2fs
bin=$PWD/target/release/b2fs
mkdir -p bench-data
frame=bench-data/verify-${mib}m.b2nd
if [ ! -f "$frame" ]; then
    "$py" scripts/oracle/verify_check.py frame "$frame" "$mib"
fi
"$bin" info --json "$frame" | "$py" -c '
import json, sys
d = json.load(sys.stdin)
ch = d["chunks"]["data/"]
n = sum(c["nbytes"] for c in ch); c = sum(c["cbytes"] for c in ch)
print(f"frame: {len(ch)} chunks, {n / 2**20:.0f} MiB -> {c / 2**20:.0f} MiB (ratio {n / c:.2f}), codec {ch[0]["codec"]}")'
cat "$frame" > /dev/null
best_r=""
now() { date +%s.%N; }
for i in $(seq 1 "$rounds"); do
    c=$("$py" scripts/oracle/verify_check.py bench "$frame" 1)
    t0=$(now)
    "$bin" verify "$frame" > /dev/null
    t1=$(now)
    r=$(echo "$t1 - $t0" | bc -l)
    printf 'round %d: python-blosc2 %.3f s, b2fs verify %.3f s\n' "$i" "$c" "$r"
    if [ -z "$best_r" ] || (( $(echo "$r < $best_r" | bc -l) )); then best_r=$r; fi
    if [ -z "${bc_c:-}" ] || (( $(echo "$c < $bc_c" | bc -l) )); then bc_c=$c; fi
done
printf 'best: python-blosc2 %.3f s (%.2f GB/s), b2fs verify %.3f s (%.2f GB/s), b2fs/C speed %.2fx\n' \
    "$bc_c" "$(echo "$mib * 1048576 / $bc_c / 1e9" | bc -l)" \
    "$best_r" "$(echo "$mib * 1048576 / $best_r / 1e9" | bc -l)" \
    "$(echo "$bc_c / $best_r" | bc -l)"
