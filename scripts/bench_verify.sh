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
print(f"frame: {len(ch)} chunks, {n / 2**20:.0f} MiB -> {c / 2**20:.0f} MiB (ratio {n / c:.2f}), codec", ch[0]["codec"])'
cat "$frame" > /dev/null
now() { date +%s.%N; }
rows=""
for i in $(seq 1 "$rounds"); do
    c=$("$py" scripts/oracle/verify_check.py bench "$frame" 1)
    t0=$(now)
    "$bin" verify "$frame" > /dev/null
    t1=$(now)
    r=$(echo "$t1 - $t0" | bc -l)
    printf 'round %d: python-blosc2 %.3f s, b2fs verify %.3f s, ratio %.2fx\n' "$i" "$c" "$r" \
        "$(echo "$c / $r" | bc -l)"
    rows="$rows $c:$r"
done
# Fastest and median of each side, and the median of the per-round ratios (python / b2fs).
"$py" - "$mib" $rows <<'PY'
import statistics, sys
mib = int(sys.argv[1])
pairs = [tuple(map(float, a.split(":"))) for a in sys.argv[2:]]
c = [p[0] for p in pairs]; r = [p[1] for p in pairs]
gbs = lambda s: mib * 2**20 / s / 1e9
print(f"python-blosc2: fastest {min(c):.3f} s ({gbs(min(c)):.2f} GB/s), median {statistics.median(c):.3f} s")
print(f"b2fs verify:   fastest {min(r):.3f} s ({gbs(min(r)):.2f} GB/s), median {statistics.median(r):.3f} s")
print(f"b2fs/python-blosc2 speed: median of per-round ratios {statistics.median(a / b for a, b in pairs):.2f}x, "
      f"fastest vs fastest {min(c) / min(r):.2f}x")
PY
