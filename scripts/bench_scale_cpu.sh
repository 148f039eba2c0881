#!/usr/bin/env bash
# The daemon's CPU for one reader and for four readers streaming the chunk files of the four
# 256 MiB leaves scripts/bench_mount.py makes (bench-data/issue25/multi256): each on a fresh
# `-o ro` mount, `cat` of every chunk file, the daemon's utime + stime from /proc/PID/stat.
# BENCHMARKS.md, "Session 10: scaling". Usage: scripts/bench_scale_cpu.sh BINARY [EXTRA_OPTS]
# (EXTRA_OPTS like ",threads=4"). Run with nothing else on the machine.
set -euo pipefail
B=$1
OPTS=${2:-}
SRC=$(cd "$(dirname "$0")/.." && pwd)/bench-data/issue25/multi256
[ -d "$SRC" ] || { echo "no $SRC: run scripts/bench_mount.py 1 BINARY --only scale first" >&2; exit 1; }
MP=$(mktemp -d)
for n in 1 4; do
    "$B" mount -f -o "ro$OPTS" "$SRC" "$MP" 2>/dev/null &
    PID=$!
    for _ in $(seq 200); do mountpoint -q "$MP" && break; sleep 0.05; done
    c0=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    t0=$(date +%s.%N)
    readers=()
    for i in $(seq 0 $((n - 1))); do
        cat "$MP/a$i.b2nd"/data/*.bin > /dev/null &
        readers+=($!)
    done
    wait "${readers[@]}"
    t1=$(date +%s.%N)
    c1=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    awk -v n="$n" -v w="$(echo "$t1 - $t0" | bc)" -v c="$(echo "($c1 - $c0) / 100" | bc -l)" \
        'BEGIN { printf "readers=%d wall=%.3f s MiB=%d rate=%.0f MiB/s daemon_cpu=%.2f s cores=%.2f\n",
                 n, w, n * 256, n * 256 / w, c, c / w }'
    umount "$MP"
    wait "$PID" || true
done
rmdir "$MP"
