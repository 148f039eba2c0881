#!/usr/bin/env bash
# Installs what b2fs's tests and demo need, if absent: fuse3 (fusermount3) with apt-get, and a
# Python venv in .venv with the pinned reference libraries (the test oracle only).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v fusermount3 >/dev/null 2>&1; then
    echo "setup: installing fuse3" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq fuse3 >/dev/null
fi

PY=.venv/bin/python
if ! "$PY" -c "import blosc2, blosc, bcolz, caterva, numpy, msgpack" >/dev/null 2>&1; then
    echo "setup: creating .venv with the reference libraries" >&2
    python3 -m venv .venv
    "$PY" -m pip install -q --disable-pip-version-check \
        "blosc2==4.14.1" "blosc==1.11.4" "caterva==0.7.3" "bcolz-zipline==1.13.0" \
        "numpy" "msgpack"
fi
