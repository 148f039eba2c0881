#!/usr/bin/env bash
# Installs what b2fs's tests and demo need, if absent: fuse3 (fusermount3, mount.fuse3), attr
# (getfattr), vim (the editor tests), rsync (the mtime tests), rclone (the plain HTTP(S) range server and the WebDAV server of the remote tests)
# and openssl (the remote TLS test makes a private CA with it)
# with apt-get, and a Python venv in .venv with the pinned reference libraries (the test oracle
# only), matplotlib (the benchmark chart), maturin, ziglang and auditwheel (the wheel test
# builds the pip package with them), moto[server] (the S3 server of the remote tests) and uv
# (which installs everything else, below).
# The Zarr view's readers (tests/it/zarr_readers.rs, scripts/bench_zarr.py) get two more venvs:
# .venv-zarr (Python 3.12: zarr-python 3.4, xarray, dask[distributed], tensorstore,
# python-blosc2) and .venv-zarr311 (Python 3.11: zarr-python 3.1, the line Python 3.11 gets);
# the Zarr v2 view's readers (tests/it/zarr_readers/v2.rs) one more: .venv-zarr2 (Python 3.10:
# zarr-python 2.18, the last release for Python 3.10, with numcodecs, and xarray 2025.6, the
# last xarray for Python 3.10 and one that still reads zarr-python 2; 1.4 s with a cold uv
# cache).
# Python 3.12 is looked for on PATH and in pyenv; without it .venv-zarr is skipped with a
# message (the tests then SKIP, or fail under B2FS_REQUIRE_PYTHON=1). B2FS_SKIP_ZARR_VENV=1
# skips both. All four venvs: about 3 minutes and 22 CPU-s on a fresh machine (measured at load
# 13), 1.8 GB (ziglang, pandas, tensorstore, dask, numpy four times).
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

# .venv comes from python3's own venv module (with pip: the wheel test installs with it), and
# uv (pinned, from PyPI) goes into it first: every other install and venv goes through uv, which
# took about a tenth of pip's CPU time (.venv: 6.5 vs 58 CPU-s; .venv-zarr: 2.2 vs 26;
# docs/DEVELOPMENT.md) and downloads in parallel. uv follows pip's PIP_INDEX_URL,
# PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS and PIP_CERT where they are set. Without uv (the install
# failed), pip does the same installs: one per venv, no byte-compiling at install (Python
# compiles what a test imports, once).
PIP_FLAGS=(-q --disable-pip-version-check --no-compile)
UV_VERSION=0.13.9
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv" >&2
    python3 -m venv .venv
fi
UV=.venv/bin/uv
if [ ! -x "$UV" ] && ! .venv/bin/python -m pip install "${PIP_FLAGS[@]}" "uv==$UV_VERSION"; then
    echo "setup: uv could not be installed: pip makes the venvs (slower)" >&2
fi
UV_FLAGS=(-q)
[ -n "${PIP_INDEX_URL:-}" ] && UV_FLAGS+=(--index-url "$PIP_INDEX_URL")
for u in ${PIP_EXTRA_INDEX_URL:-}; do UV_FLAGS+=(--extra-index-url "$u"); done
for u in ${PIP_FIND_LINKS:-}; do UV_FLAGS+=(--find-links "$u"); done
if [ -n "${PIP_CERT:-}" ] && [ -z "${SSL_CERT_FILE:-}" ]; then export SSL_CERT_FILE=$PIP_CERT; fi

venv_install() {  # DIR PACKAGES...: install into the venv DIR
    local dir=$1
    shift
    if [ -x "$UV" ]; then
        "$UV" pip install "${UV_FLAGS[@]}" --python "$dir/bin/python" "$@"
    else
        "$dir/bin/python" -m pip install "${PIP_FLAGS[@]}" "$@"
    fi
}

make_venv() {  # DIR PYTHON: a new venv in DIR (uv's has no pip of its own; none is needed)
    if [ -x "$UV" ]; then
        "$UV" venv -q --python "$2" "$1"
    else
        "$2" -m venv "$1"
    fi
}

# .venv: what is missing, in one install.
main_venv() {
    local py=.venv/bin/python want=()
    if ! "$py" -c "import blosc2, blosc, bcolz, caterva, numpy, msgpack" >/dev/null 2>&1; then
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
        venv_install .venv "${want[@]}"
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
    make_venv "$dir" "$py"
    venv_install "$dir" "$@"
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
        make_venv .venv-cat2 "$py"
        venv_install .venv-cat2 "caterva2[server]==2026.9.2"
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
    JOBS+=("zarr_venv .venv-zarr2 3.10 zarr,xarray,numcodecs zarr==2.18.3 numcodecs==0.13.1 \
        xarray==2025.6.1 pandas==2.3.3 numpy==2.2.6")
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
