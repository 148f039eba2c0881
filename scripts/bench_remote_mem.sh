#!/usr/bin/env bash
# Peak memory (VmHWM) of the b2fs daemon while `cat` streams every chunk file of a 4 GiB frame
# (bench-data/stream4096m.b2nd, written by python-blosc2 with LZ4 clevel 1 if absent: 4096
# chunks of 1 MiB decoded) mounted from local disk and over HTTP (rclone serve http on
# 127.0.0.1), with `cache_size=64M,remote_cache=64M`; with BEFORE=path/to/b2fs, also that
# binary over HTTP (an older build to compare). Rows alternate in one run, twice.
# Usage: [BEFORE=/tmp/b2fs-old] scripts/bench_remote_mem.sh [MIB] (needs a `--features remote`
# build in target/debug).
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-4096}
B=target/debug/b2fs
F=bench-data/stream${MIB}m.b2nd
mkdir -p bench-data
if [ ! -f "$F" ]; then
    .venv/bin/python - "$F" "$MIB" <<'PY'
import sys, numpy as np, blosc2
path, mib = sys.argv[1], int(sys.argv[2])
ci = 128 << 10
n = mib * ci
a = blosc2.empty((n,), dtype="f8", chunks=(ci,), blocks=(ci // 4,), urlpath=path, mode="w",
                 cparams={"clevel": 1, "codec": blosc2.Codec.LZ4})
rng = np.random.default_rng(7)
step = 64 * ci
for i in range(0, n, step):
    a[i:i + step] = (rng.standard_normal(min(step, n - i)) * 1000).round(2)
PY
fi
PORT=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
rclone serve http --addr 127.0.0.1:$PORT bench-data --config /dev/null >/dev/null 2>&1 &
RCLONE=$!
trap 'kill $RCLONE' EXIT
sleep 1
run() { # NAME SOURCE OPTS [BINARY]
    local mp pid t0 t1 b=${4:-$B}
    mp=$(mktemp -d)
    $b mount -o "$3" "$2" "$mp"
    pid=$(pgrep -f -- "--daemon-child.*$mp" | head -1)
    t0=$(date +%s.%N)
    cat "$mp"/data/* >/dev/null
    t1=$(date +%s.%N)
    printf '%-28s %6.1f s  VmHWM %4d MiB\n' "$1" "$(echo "$t1 - $t0" | bc)" \
        $(( $(awk '/VmHWM/ {print $2}' /proc/$pid/status) / 1024 ))
    $b umount "$mp"
    rmdir "$mp"
}
echo "$F: $(stat -c %s "$F") bytes; cache_size=64M, remote_cache=64M"
URL="http://127.0.0.1:$PORT/$(basename "$F")"
for round in 1 2; do
    run local "$PWD/$F" cache_size=64M,ro
    if [ -n "${BEFORE:-}" ]; then
        run "http (BEFORE)" "$URL" cache_size=64M,remote_cache=64M "$BEFORE"
    fi
    run "http" "$URL" cache_size=64M,remote_cache=64M
done
