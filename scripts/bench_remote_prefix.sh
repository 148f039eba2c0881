#!/usr/bin/env bash
# Cold sequential read of a sparse frame (a directory of chunk objects) under an S3 prefix:
# `cat MNT/data/*` of bench-data/sparse${MIB}m.b2frame (written by python-blosc2 if absent: MIB
# chunks of 1 MiB decoded, LZ4 clevel 1) mounted from local disk and from moto's S3 server on
# 127.0.0.1 (each object uploaded with curl; no added latency).
# With BEFORE=path/to/b2fs, also that binary over S3 (an older build to compare). Rows
# alternate in one run, twice; each mount is fresh (cold cache).
# Usage: [BEFORE=/tmp/b2fs-old] scripts/bench_remote_prefix.sh [MIB] (needs a
# `--features remote` build in target/debug and moto in .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-256}
B=target/debug/b2fs
F=bench-data/sparse${MIB}m.b2frame
mkdir -p bench-data
if [ ! -d "$F" ]; then
    .venv/bin/python - "$F" "$MIB" <<'PY'
import sys, numpy as np, blosc2
path, mib = sys.argv[1], int(sys.argv[2])
ci = 128 << 10
n = mib * ci
a = blosc2.empty((n,), dtype="f8", chunks=(ci,), blocks=(ci // 4,), urlpath=path, mode="w",
                 contiguous=False, cparams={"clevel": 1, "codec": blosc2.Codec.LZ4})
rng = np.random.default_rng(7)
step = 64 * ci
for i in range(0, n, step):
    a[i:i + step] = (rng.standard_normal(min(step, n - i)) * 1000).round(2)
PY
fi
PORT=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
.venv/bin/moto_server -H 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
MOTO=$!
trap 'kill $MOTO' EXIT
until curl -s -o /dev/null "http://127.0.0.1:$PORT/"; do sleep 0.2; done
EP=http://127.0.0.1:$PORT
curl -s -f -X PUT "$EP/bench" >/dev/null
for f in "$F"/*; do
    curl -s -f -X PUT -H 'x-amz-acl: public-read' --data-binary @"$f" \
        "$EP/bench/sparse/$(basename "$f")" >/dev/null
done
run() { # NAME SOURCE OPTS [BINARY]
    local mp t0 t1 b=${4:-$B}
    mp=$(mktemp -d)
    t0=$(date +%s.%N)
    $b mount -o "$3" "$2" "$mp"
    t1=$(date +%s.%N)
    local m; m=$(echo "$t1 - $t0" | bc)
    t0=$(date +%s.%N)
    cat "$mp"/data/* >/dev/null
    t1=$(date +%s.%N)
    local s; s=$(echo "$t1 - $t0" | bc)
    printf '%-18s mount %5.2f s  read %6.2f s  %6.0f MB/s decoded\n' "$1" "$m" "$s" \
        "$(echo "$MIB * 1048576 / $s / 1000000" | bc -l)"
    $b umount "$mp"
    rmdir "$mp"
}
echo "$F: $(ls "$F" | wc -l) objects, $(du -sb "$F" | cut -f1) bytes"
for round in 1 2; do
    run local "$PWD/$F" ro
    if [ -n "${BEFORE:-}" ]; then
        run "s3 (BEFORE)" "s3://bench/sparse/" "endpoint=$EP,no_sign_request" "$BEFORE"
    fi
    run s3 "s3://bench/sparse/" "endpoint=$EP,no_sign_request"
done
