#!/usr/bin/env bash
# Installs what b2fs's tests and demo need, if absent: fuse3 (fusermount3, mount.fuse3), attr
# (getfattr), vim (the editor tests), rclone (the plain HTTP(S) range server of the remote tests)
# and openssl (the remote TLS test makes a private CA with it)
# with apt-get, and a Python venv in .venv with the pinned reference libraries (the test oracle
# only), maturin, ziglang and auditwheel (the wheel test builds the pip package with them)
# and moto[server] (the S3 server of the remote tests).
set -euo pipefail
cd "$(dirname "$0")/.."

APT=()
command -v fusermount3 >/dev/null 2>&1 || APT+=(fuse3)
command -v getfattr >/dev/null 2>&1 || APT+=(attr)
command -v vim >/dev/null 2>&1 || APT+=(vim-tiny)
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
