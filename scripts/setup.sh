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

PY=.venv/bin/python
if ! "$PY" -c "import blosc2, blosc, bcolz, caterva, numpy, msgpack" >/dev/null 2>&1; then
    echo "setup: creating .venv with the reference libraries" >&2
    python3 -m venv .venv
    "$PY" -m pip install -q --disable-pip-version-check \
        "blosc2==4.14.1" "blosc==1.11.4" "caterva==0.7.3" "bcolz-zipline==1.13.0" \
        "numpy" "msgpack"
fi
if ! "$PY" -m maturin --version >/dev/null 2>&1; then
    echo "setup: installing maturin into .venv" >&2
    "$PY" -m pip install -q --disable-pip-version-check "maturin>=1.7,<2"
fi
if ! "$PY" -c "import matplotlib" >/dev/null 2>&1; then
    echo "setup: installing matplotlib into .venv (the chart of scripts/bench_mount.py)" >&2
    "$PY" -m pip install -q --disable-pip-version-check "matplotlib>=3.8,<4"
fi
# The wheel test links the manylinux2014 binary with zig (maturin's `zig cc`) and checks the
# wheel with auditwheel.
if ! "$PY" -m ziglang version >/dev/null 2>&1 || ! "$PY" -m auditwheel --version >/dev/null 2>&1; then
    echo "setup: installing ziglang and auditwheel into .venv (wheel test)" >&2
    "$PY" -m pip install -q --disable-pip-version-check "ziglang==0.17.1" "auditwheel==6.8.2"
fi
if [ ! -x .venv/bin/moto_server ]; then
    echo "setup: installing moto[server] (S3 server of the remote tests)" >&2
    "$PY" -m pip install -q --disable-pip-version-check "moto[server]==5.2.5"
fi

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
    "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@"
}

if [ "${B2FS_SKIP_ZARR_VENV:-}" != "1" ]; then
    zarr_venv .venv-zarr 3.12 "zarr, xarray, dask.distributed, tensorstore, blosc2" \
        "zarr==3.4.2" "xarray==2026.9.0" "dask[array,distributed]==2026.8.0" \
        "tensorstore==0.1.86" "numpy==2.4.6" "blosc2==4.14.1" "pandas==3.1.1"
    zarr_venv .venv-zarr311 3.11 "zarr" "zarr==3.1.6" "numpy==2.4.6"
fi

# Caterva2's server (the Caterva2 tests start cat2-server on 127.0.0.1): it needs Python 3.12,
# so it lives in a venv of its own, .venv-cat2 (about 2.5 min to install here).
if [ ! -x .venv-cat2/bin/python ] || ! .venv-cat2/bin/python -c "import caterva2.services.server" >/dev/null 2>&1; then
    if CAT2_PY="${CAT2_PYTHON:-$(find_python 3.12)}"; then
        rm -rf .venv-cat2
        echo "setup: creating .venv-cat2 with caterva2[server] (the Caterva2 tests' server)" >&2
        "$CAT2_PY" -m venv .venv-cat2
        .venv-cat2/bin/python -m pip install -q --disable-pip-version-check \
            "caterva2[server]==2026.9.2"
    else
        echo "setup: no Python 3.12: the Caterva2 tests will skip (set CAT2_PYTHON)" >&2
    fi
fi
