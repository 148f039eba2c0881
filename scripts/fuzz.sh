#!/usr/bin/env bash
# Runs b2fs's cargo-fuzz targets (coverage-guided libFuzzer, AddressSanitizer, debug
# assertions on). Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
#
#   scripts/fuzz.sh TARGET SECONDS [JOBS]   one target for SECONDS (JOBS parallel workers, 1)
#   scripts/fuzz.sh all SECONDS             every target in turn, SECONDS each
#   scripts/fuzz.sh build                   build every target
#   scripts/fuzz.sh cmin TARGET             minimise fuzz/corpus/TARGET + fuzz/work/TARGET
#                                           into fuzz/corpus/TARGET
#   scripts/fuzz.sh list                    the targets
#
# Each run starts from the stored corpus (fuzz/corpus/TARGET) plus seeds made from the
# fixtures in tests/data; new inputs go to fuzz/work/TARGET (not stored: `cmin` folds them in).
# A crash, leak, timeout (10 s) or out-of-memory (one allocation over 256 MiB, or RSS over
# 1 GiB) stops the run with a non-zero exit and leaves the input in fuzz/artifacts/TARGET/;
# make it a fix plus a file in tests/data/fuzz-regressions/TARGET/ (replayed by `cargo test`,
# tests/it/fuzz.rs). The last line of each run is a summary: target, executions, seconds,
# CPU seconds, exec/s, corpus size, coverage.
#
# B2FS_FUZZ_RUNS=N stops a run after N executions (or SECONDS, whichever comes first).
# B2FS_FUZZ_RSS_MB=M: the RSS limit (1024). B2FS_FUZZ_TIMEOUT=S: the per-input timeout
# (10 s). A run on a machine where something may stop it for a while (a benchmark lock that
# SIGSTOPs nice-19 processes) needs more than that
# pause, or the pause is reported as a timeout of whatever input was running.
# B2FS_FUZZ_ASAN=0: the throughput build for long runs, the same coverage instrumentation and
# debug assertions without AddressSanitizer (2-3x more executions per CPU second; Rust code
# outside `unsafe` is memory safe without it). It lives in fuzz/target-noasan; its one-
# allocation limit is kept by a limiting allocator in fuzz/src/lib.rs (libFuzzer's
# -malloc_limit_mb needs the sanitizer); leak detection is lost. CI's short runs keep ASan.
# Scratch files of the targets (frame_open, bcolz_open write each input to a file) go to
# /dev/shm when it is writable (B2FS_FUZZ_TMP overrides): no disk I/O per execution.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TARGETS="chunk_decode frame_open bcolz_open attrs npy_dtype store_open tree_walk tree_edit zarr_edit"
LOGS=${B2FS_FUZZ_LOGS:-fuzz/logs}
TRIPLE=$(rustc +nightly -vV | sed -n 's/^host: //p')
# Without cargo-fuzz (or with B2FS_FUZZ_DIRECT=1) the targets are built with the same cargo
# invocation and flags cargo-fuzz 0.13 uses (address sanitizer, sancov, debug assertions, one
# codegen unit, host build scripts unsanitised through --target) and run directly: the same
# binaries, without installing cargo-fuzz first.
DIRECT=${B2FS_FUZZ_DIRECT:-}
ASAN=${B2FS_FUZZ_ASAN:-1}
if [ "$ASAN" = 0 ]; then DIRECT=1; fi
if [ -z "$DIRECT" ] && ! cargo +nightly fuzz --version >/dev/null 2>&1; then DIRECT=1; fi
FUZZ_RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4\
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table\
 -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing\
 -Cllvm-args=-simplifycfg-branch-fold-threshold=0\
 -Cllvm-args=-sanitizer-coverage-stack-depth -Cdebug-assertions -Ccodegen-units=1"
if [ "$ASAN" = 0 ]; then
    FUZZ_RUSTFLAGS="$FUZZ_RUSTFLAGS --cfg b2fs_fuzz_no_asan"
    TARGET_DIR=fuzz/target-noasan
else
    FUZZ_RUSTFLAGS="$FUZZ_RUSTFLAGS -Zsanitizer=address"
    TARGET_DIR=fuzz/target
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0
SCRATCH=${B2FS_FUZZ_TMP:-/dev/shm}
if [ -d "$SCRATCH" ] && [ -w "$SCRATCH" ]; then export TMPDIR=$SCRATCH; fi

usage() {
    sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

build_all() {
    if [ -n "$DIRECT" ]; then
        RUSTFLAGS="$FUZZ_RUSTFLAGS" cargo +nightly build --manifest-path fuzz/Cargo.toml \
            --target-dir "$TARGET_DIR" --target "$TRIPLE" --release --config 'profile.release.debug="line-tables-only"' \
            --bins
    else
        cargo +nightly fuzz build --debug-assertions
    fi
}

# Sets CMD to the command that runs target $1 with "${@:2}" (corpus directories, then `--`,
# then libFuzzer flags).
fuzz_cmd() {
    local t=$1 a
    shift
    if [ -n "$DIRECT" ]; then
        CMD=("$TARGET_DIR/$TRIPLE/release/$t" -artifact_prefix="fuzz/artifacts/$t/")
        for a in "$@"; do [ "$a" = "--" ] || CMD+=("$a"); done
    else
        CMD=(cargo +nightly fuzz run --debug-assertions "$t" "$@")
    fi
}

# Longest input per target: the largest fixture seed of each kind fits.
max_len() {
    case $1 in
        chunk_decode) echo 262144 ;;
        frame_open) echo 131072 ;;
        bcolz_open) echo 65536 ;;
        npy_dtype) echo 4096 ;;
        store_open | tree_walk | tree_edit) echo 65536 ;;
        *) echo 8192 ;;
    esac
}

# Seeds made from the fixtures, into directory $2 (the fixtures stay where they are).
seeds() {
    local t=$1 out=$2 d i
    mkdir -p "$out"
    case $t in
        chunk_decode)
            find tests/data/chunks -name '*.chunk' -size -256k -exec cp -t "$out" {} + ;;
        frame_open)
            # Contiguous frames, and the index file of each sparse frame.
            for f in tests/data/frames/* tests/data/refuse/frame_*; do
                case $f in *.json) continue ;; esac
                if [ -d "$f" ]; then
                    cp "$f/chunks.b2frame" "$out/$(basename "$f").chunks.b2frame"
                else
                    cp "$f" "$out/"
                fi
            done ;;
        bcolz_open)
            # Each carray (and ctable column): its files joined by the separator that
            # b2fs_fuzz::bcolz_open splits on.
            i=0
            for d in $(find tests/data/bcolz tests/data/refuse -name meta -type d); do
                d=$(dirname "$d")
                {
                    cat "$d/meta/sizes" 2>/dev/null || true; printf '\n--\n'
                    cat "$d/meta/storage" 2>/dev/null || true; printf '\n--\n'
                    cat "$d/__attrs__" 2>/dev/null || true
                    for c in 0 1 2; do
                        [ -f "$d/data/__$c.blp" ] || break
                        printf '\n--\n'; head -c 16384 "$d/data/__$c.blp"
                    done
                } > "$out/carray_$i"
                i=$((i + 1))
            done ;;
        attrs)
            for f in tests/data/*/*.json $(find tests/data/bcolz -name __attrs__); do
                cp "$f" "$out/$(echo "$f" | tr / _)"
            done ;;
        npy_dtype)
            # Every dtype string the fixtures record (sidecars and meta/storage).
            i=0
            grep -rhoE '"dtype": *"[^"]*"' tests/data --include='*.json' --include=storage \
                | sed -E 's/^"dtype": *"(.*)"$/\1/' | sort -u | while IFS= read -r d; do
                printf '%s' "$d" > "$out/fixture_$i"
                i=$((i + 1))
            done ;;
        store_open)
            # The stores python-blosc2 writes, stored in fuzz/seeds/store_open (made by
            # scripts/oracle/stores.py fuzzseeds); nothing in tests/data is a store.
            cp fuzz/seeds/store_open/* "$out/" ;;
        tree_walk)
            # A kind byte (0 frame, 1 bcolz carray, 2 .b2z, 3 .b2d: fuzz/src/source.rs), then
            # the source: every frame fixture under 64 KiB, every carray as bcolz_open joins
            # it; the stores (as .b2z and .b2d) are in fuzz/seeds/tree_walk.
            cp fuzz/seeds/tree_walk/* "$out/"
            seeds bcolz_open "$out/.bcolz"
            for f in $(find tests/data/frames -maxdepth 1 -type f ! -name '*.json' -size -64k); do
                { printf '\x00'; cat "$f"; } > "$out/frame_$(basename "$f")"
            done
            for f in "$out"/.bcolz/*; do
                { printf '\x01'; cat "$f"; } > "$out/bcolz_$(basename "$f")"
            done
            rm -rf "$out/.bcolz" ;;
        tree_edit)
            # A kind byte, an operation byte (fuzz/src/tree.rs: Op, offset), the source, then
            # fuzz/src/tree.rs's EDIT_SEPARATOR and the bytes to write: each operation at
            # offset 0 on a few frame fixtures; six on two stores are in fuzz/seeds/tree_edit.
            cp fuzz/seeds/tree_edit/* "$out/"
            for f in tests/data/frames/b2nd_1d_f8.b2nd tests/data/frames/b2nd_attrs.b2nd \
                tests/data/frames/schunk_lz4.b2frame tests/data/frames/b2nd_2d_i4_odd.b2nd; do
                for op in 0 1 2 3 4 5 6 7; do
                    { printf '\x00'; printf "\\x0$op"; cat "$f"; printf '\n##edit##\n'
                      printf '{"title": "edited", "n": [1, 2.5]}'; } > "$out/$(basename "$f")_$op"
                done
            done ;;
        zarr_edit)
            # A kind byte, four step bytes (fuzz/src/zarr.rs: Step and its pick), the source,
            # fuzz/src/tree.rs's EDIT_SEPARATOR and the payload (attributes, bytes written):
            # five step sequences (zarr-python's shrink: removals, then the rename; grows,
            # attributes, whole chunk writes, absurd lengths) on frame fixtures of 0 to 3
            # dimensions, and the same on tree_edit's stores and the bcolz carrays.
            local seqs='\x15\x10\x04\x03 \x20\x19\x06\x02 \x19\x07\x0e\x3c \x30\x38\x28\x0d \x15\x0d\x00\x14'
            local n sq
            for f in tests/data/frames/b2nd_1d_f8.b2nd tests/data/frames/b2nd_attrs.b2nd \
                tests/data/frames/b2nd_2d_i4_odd.b2nd tests/data/frames/b2nd_3d_f4_pad.b2nd \
                tests/data/frames/b2nd_0d_f8.b2nd tests/data/frames/b2nd_len0.b2nd; do
                n=0
                for sq in $seqs; do
                    { printf '\x00'; printf "$sq"; cat "$f"; printf '\n##edit##\n'
                      printf '{"units": "K", "n": [1, 2.5]}'; } > "$out/$(basename "$f")_$n"
                    n=$((n + 1))
                done
            done
            seeds bcolz_open "$out/.bcolz"
            for f in fuzz/seeds/tree_edit/* "$out"/.bcolz/*; do
                n=0
                for sq in $seqs; do
                    case $f in
                        */.bcolz/*) { printf '\x01'; printf "$sq"; cat "$f"; } ;;
                        *) { head -c 1 "$f"; printf "$sq"; tail -c +3 "$f"; } ;;
                    esac > "$out/$(basename "$f")_z$n"
                    n=$((n + 1))
                done
            done
            rm -rf "$out/.bcolz"
            # Creation mode (kind byte 0x80: the frame in a directory of sources; 0x83: a
            # .b2d store of tree_edit's seeds): mkdir, array and group documents (valid,
            # hostile: the payload's members over a valid one), chunk objects, link, rmdir.
            local cseqs='\x00\x01\x0d\x18 \x00\x18\x29\x06 \x38\x02\x09\x07 \x00\x04\x05\x03 \x00\x18\x11\x1e'
            for f in tests/data/frames/b2nd_1d_f8.b2nd tests/data/frames/b2nd_attrs.b2nd; do
                n=0
                for sq in $cseqs; do
                    { printf '\x80'; printf "$sq"; cat "$f"; printf '\n##edit##\n'
                      printf '{"shape": [6], "fill_value": 3, "data_type": "int32"}'; } \
                        > "$out/$(basename "$f")_c$n"
                    n=$((n + 1))
                done
            done
            for f in fuzz/seeds/tree_edit/*; do
                n=0
                for sq in $cseqs; do
                    { printf '\x83'; printf "$sq"; tail -c +3 "$f"; } > "$out/$(basename "$f")_c$n"
                    n=$((n + 1))
                done
            done ;;
        *) echo "unknown target $t (one of: $TARGETS)" >&2; exit 2 ;;
    esac
}

# Fuzzes target $1 for $2 seconds with $3 workers (libFuzzer -fork when > 1). New inputs go to
# fuzz/work/TARGET (not stored); the stored corpus and the fixture seeds are read as inputs.
run() {
    local t=$1 secs=$2 jobs=${3:-1} seeddir log
    seeddir=$(mktemp -d)
    seeds "$t" "$seeddir"
    mkdir -p "fuzz/work/$t" "fuzz/corpus/$t" "$LOGS"
    log=$LOGS/$t.log
    local extra=()
    if [ "$jobs" -gt 1 ]; then extra=(-fork="$jobs"); fi
    # B2FS_FUZZ_RUNS=N: stop after N executions (or SECONDS, whichever comes first).
    if [ -n "${B2FS_FUZZ_RUNS:-}" ]; then extra+=(-runs="$B2FS_FUZZ_RUNS"); fi
    local start=$SECONDS rc=0
    mkdir -p "fuzz/artifacts/$t"
    fuzz_cmd "$t" "fuzz/work/$t" "fuzz/corpus/$t" "$seeddir" -- \
        -max_total_time="$secs" -max_len="$(max_len "$t")" -timeout="${B2FS_FUZZ_TIMEOUT:-10}" \
        -rss_limit_mb="${B2FS_FUZZ_RSS_MB:-1024}" -malloc_limit_mb=256 -print_final_stats=1 "${extra[@]}"
    /usr/bin/time -f '%U %S' -o "$log.cpu" "${CMD[@]}" > "$log" 2>&1 || rc=$?
    rm -rf "$seeddir"
    local took=$((SECONDS - start)) runs corp cov
    # The final stats, else the last status line: "#RUNS ... cov: E ft: F corp: FILES/SIZE".
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    [ -n "$runs" ] || runs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
    corp=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -1 | cut -d' ' -f2 || true)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 | awk '{print $2 "/" $4}' || true)
    # CPU seconds (user + system) of the run: on a shared machine, the wall time overstates it.
    local cpu
    cpu=$(tail -1 "$log.cpu" 2>/dev/null | awk 'NF == 2 {printf "%.1f", $1 + $2}' || true)
    echo "fuzz: $t runs=${runs:-0} seconds=$took cpu_seconds=${cpu:-?}" \
        "exec/s=$(( ${runs:-0} / (took > 0 ? took : 1) )) corpus=${corp:-?}" \
        "edges/features=${cov:-?} asan=$ASAN rc=$rc (log: $log)"
    if [ $rc -ne 0 ]; then
        tail -40 "$log" >&2
        return $rc
    fi
}

# Replaces fuzz/corpus/TARGET by a minimal set (libFuzzer -merge) of it, fuzz/work/TARGET and
# the fixture seeds that keeps their coverage.
cmin() {
    local t=$1 seeddir new
    seeddir=$(mktemp -d); new=$(mktemp -d)
    seeds "$t" "$seeddir"
    mkdir -p "fuzz/work/$t" "fuzz/corpus/$t"
    fuzz_cmd "$t" "$new" "fuzz/corpus/$t" "fuzz/work/$t" "$seeddir" -- \
        -merge=1 -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=1024 \
        -malloc_limit_mb=256
    "${CMD[@]}" > "$LOGS/$t.cmin.log" 2>&1
    # Inputs equal to a fixture seed are made again by every run: not stored (libFuzzer names
    # merged inputs by their sha1).
    (cd "$seeddir" && find . -type f -exec sha1sum -- {} +) | while read -r sum _; do
        rm -f "$new/$sum"
    done
    # Stay under the stored budget: the smallest inputs first.
    local budget=$((${B2FS_FUZZ_CORPUS_KIB:-400} * 1024)) used=0 f size
    rm -rf "fuzz/corpus/$t" "$seeddir"
    mkdir -p "fuzz/corpus/$t"
    for f in $(ls -Sr "$new"); do
        size=$(stat -c %s "$new/$f")
        [ $((used + size)) -le "$budget" ] || break
        cp "$new/$f" "fuzz/corpus/$t/"
        used=$((used + size))
    done
    echo "fuzz: $t merge kept $(ls "$new" | wc -l) inputs beyond the fixtures" >&2
    rm -rf "$new"
    echo "fuzz: $t corpus minimised to $(find "fuzz/corpus/$t" -type f | wc -l) files," \
        "$(( $(cat "fuzz/corpus/$t"/* | wc -c) / 1024 )) KiB"
}

case ${1:-} in
    list) echo "$TARGETS" ;;
    build) build_all ;;
    cmin)
        [ $# -eq 2 ] || usage
        mkdir -p "$LOGS"
        cmin "$2" ;;
    all)
        [ $# -eq 2 ] || usage
        build_all
        status=0
        for t in $TARGETS; do run "$t" "$2" || status=1; done
        exit $status ;;
    ""|-h|--help) usage ;;
    *)
        [ $# -ge 2 ] || usage
        run "$1" "$2" "${3:-1}" ;;
esac
