#!/usr/bin/env bash
# Installs what b2fs's tests and demo need, if absent: fuse3 (fusermount3, mount.fuse3), attr
# (getfattr), vim (the editor tests), rsync (the mtime tests), rclone (the plain HTTP(S) range server of the remote tests)
# and openssl (the remote TLS test makes a private CA with it)
# with apt-get, and a Python venv in .venv with the pinned reference libraries (the test oracle
# only), matplotlib (the benchmark chart), maturin, ziglang and auditwheel (the wheel test
# builds the pip package with them) and moto[server] (the S3 server of the remote tests).
# The Zarr view's readers (tests/it/zarr_readers.rs, scripts/bench_zarr.py) get two more venvs:
# .venv-zarr (Python 3.12: zarr-python 3.4, xarray, dask[distributed], tensorstore,
# python-blosc2) and .venv-zarr311 (Python 3.11: zarr-python 3.1, the line Python 3.11 gets).
# Python 3.12 is looked for on PATH and in pyenv; without it .venv-zarr is skipped with a
# message (the tests then SKIP, or fail under B2FS_REQUIRE_PYTHON=1). B2FS_SKIP_ZARR_VENV=1
# skips both. About 2 minutes and 500 MB on a fresh machine (pandas, tensorstore, numpy).
# The Caterva2 tests' server gets .venv-cat2 (Python 3.12, caterva2[server]).
set -euo pipefail
cd "$(dirname "$0")/.."

APT=()
command -v fusermount3 >/dev/null 2>&1 || APT+=(fuse3)
command -v getfattr >/dev/null 2>&1 || APT+=(attr)
command -v vim >/dev/null 2>&1 || APT+=(vim-tiny)
command -v rsync >/dev/null 2>&1 || APT+=(rsync)
command -v rclone >/dev/null 2>&1 || APT+=(rclone)
command -v openssl >/dev/null 2>&1 || APT+=(openssl)
if [ "${#APT[@]}" -gt 0 ]; then
    echo "setup: installing ${APT[*]}" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${APT[@]}" >/dev/null
fi

# Pip: one install per venv, no byte-compiling at install (Python compiles what a test
# imports, once), downloads cached in pip's cache (PIP_CACHE_DIR, default ~/.cache/pip).
PIP_FLAGS=(-q --disable-pip-version-check --no-compile)

# .venv: what is missing, in one pip install.
main_venv() {
    local py=.venv/bin/python want=()
    if ! "$py" -c "import blosc2, blosc, bcolz, caterva, numpy, msgpack" >/dev/null 2>&1; then
        if [ ! -x "$py" ]; then
            echo "setup: creating .venv" >&2
            python3 -m venv .venv
        fi
        want+=("blosc2==4.14.1" "blosc==1.11.4" "caterva==0.7.3" "bcolz-zipline==1.13.0" "numpy"
            "msgpack")
    fi
    "$py" -m maturin --version >/dev/null 2>&1 || want+=("maturin>=1.7,<2")
    # matplotlib: the chart of scripts/bench_mount.py.
    "$py" -c "import matplotlib" >/dev/null 2>&1 || want+=("matplotlib>=3.8,<4")
    # The wheel test links the manylinux2014 binary with zig (maturin's `zig cc`) and checks
    # the wheel with auditwheel.
    "$py" -m ziglang version >/dev/null 2>&1 || want+=("ziglang==0.17.1")
    "$py" -m auditwheel --version >/dev/null 2>&1 || want+=("auditwheel==6.8.2")
    # moto[server]: the S3 server of the remote tests.
    [ -x .venv/bin/moto_server ] || want+=("moto[server]==5.2.5")
    if [ "${#want[@]}" -gt 0 ]; then
        echo "setup: installing into .venv: ${want[*]}" >&2
        "$py" -m pip install "${PIP_FLAGS[@]}" "${want[@]}"
    fi
}

# A python3.N interpreter: on PATH, or in pyenv's versions (which need no shell init).
find_python() {
    local v=$1 c
    for c in "$(command -v "python$v" 2>/dev/null)" \
        "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/"python$v"; do
        if [ -n "$c" ] && [ -x "$c" ] &&
            "$c" -c "import sys, venv; assert sys.version_info[:2] == tuple(map(int, '$v'.split('.')))" \
                >/dev/null 2>&1; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

zarr_venv() {  # DIR PYTHON_VERSION IMPORTS PACKAGES...
    local dir=$1 v=$2 imports=$3 py
    shift 3
    if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "import $imports" >/dev/null 2>&1; then
        return 0
    fi
    if ! py=$(find_python "$v"); then
        echo "setup: SKIP $dir: no python$v on PATH or in pyenv (the Zarr reader tests skip)" >&2
        return 0
    fi
    echo "setup: creating $dir ($py) with $*" >&2
    rm -rf "$dir"
    "$py" -m venv "$dir"
    "$dir/bin/python" -m pip install "${PIP_FLAGS[@]}" "$@"
}

zarr_venvs() {
    zarr_venv .venv-zarr 3.12 "zarr, xarray, dask.distributed, tensorstore, blosc2" \
        "zarr==3.4.2" "xarray==2026.9.0" "dask[array,distributed]==2026.8.0" \
        "tensorstore==0.1.86" "numpy==2.4.6" "blosc2==4.14.1" "pandas==3.1.1"
}

# Caterva2's server (the Caterva2 tests start cat2-server on 127.0.0.1): it needs Python 3.12,
# so it lives in a venv of its own, .venv-cat2. Its server module refuses to import without
# CATERVA2_SECRET: the check sets one, else every run would build the venv again.
cat2_venv() {
    if [ -x .venv-cat2/bin/python ] && CATERVA2_SECRET=setup-check \
        .venv-cat2/bin/python -c "import caterva2.services.server" >/dev/null 2>&1; then
        return 0
    fi
    local py
    if py="${CAT2_PYTHON:-$(find_python 3.12)}"; then
        rm -rf .venv-cat2
        echo "setup: creating .venv-cat2 with caterva2[server] (the Caterva2 tests' server)" >&2
        "$py" -m venv .venv-cat2
        .venv-cat2/bin/python -m pip install "${PIP_FLAGS[@]}" "caterva2[server]==2026.9.2"
    else
        echo "setup: no Python 3.12: the Caterva2 tests will skip (set CAT2_PYTHON)" >&2
    fi
}

# The venvs are independent: they are made side by side (downloads and unpacking overlap),
# each one's messages printed when it is done; any failure fails the set-up.
LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT
JOBS=(main_venv cat2_venv)
if [ "${B2FS_SKIP_ZARR_VENV:-}" != "1" ]; then
    JOBS+=(zarr_venvs "zarr_venv .venv-zarr311 3.11 zarr zarr==3.1.6 numpy==2.4.6")
fi
PIDS=()
for j in "${JOBS[@]}"; do
    # shellcheck disable=SC2086 # a job is a function name and its words
    $j > "$LOGS/${#PIDS[@]}.log" 2>&1 &
    PIDS+=($!)
done
STATUS=0
for i in "${!PIDS[@]}"; do
    if ! wait "${PIDS[$i]}"; then
        echo "setup: FAILED: ${JOBS[$i]}" >&2
        STATUS=1
    fi
    cat "$LOGS/$i.log" >&2
done
exit $STATUS
