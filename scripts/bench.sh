#!/usr/bin/env bash
# Runs every benchmark (release build), each against C-Blosc2 (python-blosc2) in the same run.
# Results are printed as tables; BENCHMARKS.md records them with this command.
#   bash scripts/bench.sh            # all
#   bash scripts/bench.sh decode     # one of: decode encode filters read verify mount zarr remote
# filters: the filter kernels at every SIMD level, compared with each other (no reference).
# remote (not in the default list: it needs moto and rclone from scripts/setup.sh, and takes
# minutes): benches/remote.rs, remote mounts against a local mount or the server's own rate.
# zarr (not in the default list: it makes 2 GB of sources once, and needs .venv-zarr): the
# Zarr view through xarray and zarr-python against python-blosc2 and a native Zarr copy
# (scripts/bench_zarr.py, release build).
# `mount` (scripts/bench_mount.py: every read pattern of issue 25 through a real mount against
# python-blosc2, 3 alternating rounds) rewrites the summary at the top of BENCHMARKS.md and
# docs/bench.png; set B2FS_AB=/path/to/other/b2fs to add a same-run A/B of the sequential reads.
# floor (not in the default list): scripts/bench_floor.py, the CPU per mapped strip and window
# of both sides against the least b2fs could spend (BENCHMARKS.md, "Session 19: the CPU floor").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export B2FS_PYTHON="$PWD/.venv/bin/python"
echo "machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "rustc: $(rustc --version)   commit: $(git rev-parse --short HEAD)"
for b in ${1:-decode encode filters read verify mount}; do
    echo "== $b"
    if [ "$b" = verify ]; then
        bash scripts/bench_verify.sh   # b2fs verify vs python-blosc2 over a 1 GiB frame
    elif [ "$b" = zarr ]; then
        cargo build --release --quiet
        .venv-zarr/bin/python scripts/bench_zarr.py 3 target/release/b2fs 200
    elif [ "$b" = remote ]; then
        cargo bench --features remote --bench remote
    elif [ "$b" = floor ]; then
        cargo build --release --features remote
        .venv/bin/python scripts/bench_floor.py "${B2FS_ROUNDS:-5}" target/release/b2fs
    elif [ "$b" = mount ]; then
        cargo build --release
        .venv/bin/python scripts/bench_mount.py "${B2FS_ROUNDS:-3}" target/release/b2fs \
            --write BENCHMARKS.md --chart docs/bench.png ${B2FS_AB:+--ab "$B2FS_AB"}
    else
        cargo bench --bench "$b"
    fi
done
