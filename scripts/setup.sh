#!/usr/bin/env bash
# Installs what b2fs's tests and demo need, if absent: fuse3 (fusermount3) and rclone (the plain
# HTTP range server of the remote tests) with apt-get, a Python venv in .venv with the pinned
# reference libraries (the test oracle only), and moto[server] (the S3 server of the remote
# tests) in that venv.
set -euo pipefail
cd "$(dirname "$0")/.."

MISSING=""
command -v fusermount3 >/dev/null 2>&1 || MISSING="$MISSING fuse3"
command -v rclone >/dev/null 2>&1 || MISSING="$MISSING rclone"
if [ -n "$MISSING" ]; then
    echo "setup: installing$MISSING" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $MISSING >/dev/null
fi

PY=.venv/bin/python
if ! "$PY" -c "import blosc2, blosc, bcolz, caterva, numpy, msgpack" >/dev/null 2>&1; then
    echo "setup: creating .venv with the reference libraries" >&2
    python3 -m venv .venv
    "$PY" -m pip install -q --disable-pip-version-check \
        "blosc2==4.14.1" "blosc==1.11.4" "caterva==0.7.3" "bcolz-zipline==1.13.0" \
        "numpy" "msgpack"
fi

if [ ! -x .venv/bin/moto_server ]; then
    echo "setup: installing moto[server] (S3 server of the remote tests)" >&2
    "$PY" -m pip install -q --disable-pip-version-check "moto[server]==5.2.5"
fi
