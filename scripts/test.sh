#!/usr/bin/env bash
# The whole test suite: set-up if needed, then format check, clippy, and every test.
# In CI (CI=true) real-mount, python-oracle and remote-server (moto, rclone) tests fail instead
# of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step prints how long it took, in wall seconds and in CPU seconds (user + system of every
# process it waited for, from bash's `times`: on the 2-core machine the CPU count is what adds
# up; docs/DEVELOPMENT.md, "Where CI's time goes").
T0=$SECONDS
TIMES=$(mktemp)
cpu_now() {  # CPU: user + system seconds (x100) of this shell's waited-for children
    times > "$TIMES"  # in this shell: a $(...) subshell would count only its own children
    CPU=$(sed -n 2p "$TIMES" | tr 'ms' '  ' |
        awk '{ printf "%d", ($1 * 60 + $2 + $3 * 60 + $4) * 100 + 0.5 }')
}
cpu_now
CPU0=$CPU
step() {
    local start=$SECONDS cpu
    cpu_now
    cpu=$CPU
    "$@"
    cpu_now
    echo "time: $((SECONDS - start)) s, $(((CPU - cpu) / 100)) CPU-s; $((SECONDS - T0)) s," \
        "$(((CPU - CPU0) / 100)) CPU-s in all: $*" >&2
}
# The set-up (apt packages and Python venvs: mostly network and unpacking) runs beside the
# lints and the test build, which need none of it; the tests wait for it.
SETUP_LOG=$(mktemp)
bash scripts/setup.sh > "$SETUP_LOG" 2>&1 &
SETUP=$!
CHILDREN=$SETUP
trap 'kill -TERM -- $CHILDREN 2>/dev/null || true; rm -f "$SETUP_LOG" "$TIMES"' EXIT
setup_done() {
    local rc=0
    wait "$SETUP" || rc=$?
    CHILDREN=${CHILDREN#"$SETUP"}
    cat "$SETUP_LOG" >&2
    [ $rc -eq 0 ] || { echo "scripts/setup.sh failed ($rc)" >&2; return $rc; }
}
export B2FS_PYTHON="$PWD/.venv/bin/python"
# Daemons log to $XDG_RUNTIME_DIR/b2fs-PID.log, or /tmp without it (root on CI): the suite's
# hundreds of mounts log under target/ instead of leaving their logs in /tmp.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
    export XDG_RUNTIME_DIR="$PWD/target/test-logs"
    rm -rf "$XDG_RUNTIME_DIR" && mkdir -p "$XDG_RUNTIME_DIR"
fi
# Python writes the bytecode of what the tests import into the venvs (gitignored), once: with
# PYTHONDONTWRITEBYTECODE set (this machine's environment sets it) and venvs made without
# bytecode (scripts/setup.sh), every interpreter of the suite compiled its imports again
# (importing numpy, python-blosc2, bcolz, moto's server and boto3: 3.1 CPU-s instead of 0.9).
# A fresh clone's tests took 280 s in CI's steps, against 145-160 s in a clone whose venvs
# had their bytecode (session 14, docs/DEVELOPMENT.md).
unset PYTHONDONTWRITEBYTECODE
# Three test threads on two vCPUs: the tests wait on mounts, daemons and interpreters a third
# of the time (1.6 cores busy with two threads); 131 s instead of 144 for the suite (session 14).
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-3}
if [ "${CI:-}" = "true" ]; then
    export B2FS_REQUIRE_FUSE=1 B2FS_REQUIRE_PYTHON=1 B2FS_REQUIRE_REMOTE=1
    # A fresh clone has no incremental state to reuse: the crate's units compile without
    # writing one (fewer, larger codegen units, no dependency graph saved). Exported, so every
    # cargo below (and the wheel test's maturin) sees the same setting and reuses the builds.
    export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
fi
# Fuzzing: B2FS_FUZZ_SECONDS per target (10 by default; 0 in CI, where the budget is 15
# minutes on 2 cores). The fuzz targets' build (nightly, AddressSanitizer, its own target
# directory: every dependency compiled a third time, about 6 CPU-minutes from scratch, plus
# 11 CPU-s of runs per target) is most of what a 10 s run costs, and `cargo test` below replays the
# stored corpora and regression inputs through the same entry functions on the stable toolchain
# anyway. Longer runs are `scripts/fuzz.sh` (RELIABILITY.md). When it runs, the build starts
# here at the lowest priority: it takes the CPU the steps below leave idle, and the fuzz runs at
# the end find it done.
FUZZ_SECONDS=${B2FS_FUZZ_SECONDS:-10}
[ "${CI:-}" = "true" ] && FUZZ_SECONDS=${B2FS_FUZZ_SECONDS:-0}
FUZZ_BUILD=
if [ "$FUZZ_SECONDS" = 0 ]; then
    echo "fuzz runs off (B2FS_FUZZ_SECONDS=0, CI's default); the corpora are replayed by cargo test" >&2
elif cargo +nightly --version >/dev/null 2>&1; then
    mkdir -p fuzz/logs
    setsid nice -n 19 bash scripts/fuzz.sh build > fuzz/logs/build.log 2>&1 &
    FUZZ_BUILD=$!
    CHILDREN="$CHILDREN -$FUZZ_BUILD"
else
    echo "SKIP fuzz runs: no nightly toolchain (rustup toolchain install nightly)" >&2
fi
step cargo fmt --all -- --check
if grep -rlP '[^\x00-\x7F]' src tests/it benches Cargo.toml; then
    echo "non-ASCII characters in the files above" >&2; exit 1
fi
# Remote sources (S3/HTTP) are the non-default `remote` feature: lint and test with it; the
# build without it differs only in the product code (one stub in src/cli/remote.rs), so its
# lint covers the library and binary, not the tests again.
step cargo clippy --all-targets --locked --features remote -- -D warnings
step cargo clippy --lib --bins --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" step cargo doc --no-deps --document-private-items --locked --quiet --features remote
step cargo test --locked --features remote --no-run
step setup_done
step cargo test --locked --features remote
# The pip wheel test relinks target/debug/b2fs with maturin (the `dev` profile is the `test`
# profile's settings, so nothing else is compiled again): alone, after the suite.
# auto_unmount under SIGKILL runs here too, before it (one thread, in name order): beside the
# parallel suite its mount sometimes stays (the fusermount3 helper is gone; cause not found,
# tests/it/system.rs). maturin's build compiles the binary crate alone (Cargo.toml's feature
# unification; tests/it/wheel.rs keeps cargo test's own variables out of maturin's cargo).
step cargo test --locked --features remote --test it -- --ignored --test-threads 1 \
    system_auto_unmount wheel_
# Fuzzing (RELIABILITY.md), when on: every fuzz target for a short bounded time; without
# cargo-fuzz, scripts/fuzz.sh builds and runs the same libFuzzer binaries directly.
fuzz_build_done() {
    if ! wait "$FUZZ_BUILD"; then
        tail -n 40 fuzz/logs/build.log >&2
        echo "the fuzz targets did not build (fuzz/logs/build.log)" >&2
        return 1
    fi
}
if [ -n "$FUZZ_BUILD" ]; then
    step fuzz_build_done
    step bash scripts/fuzz.sh all "$FUZZ_SECONDS"
fi
