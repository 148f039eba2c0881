#!/usr/bin/env python3
"""Regenerates every reference-made fixture under tests/data/ (and examples/sample.b2nd).

Run from the repository root:

    .venv/bin/python scripts/gen_fixtures.py

Pinned reference libraries (the venv made by scripts/setup.sh):
    python-blosc2 4.14.1 (C-Blosc2 3.3.5), python-blosc 1.11.4 (C-Blosc 1.21.x),
    bcolz-zipline 1.13.0 (C-Blosc 1.21.x), caterva 0.7.3, numpy 2.x, msgpack.

Deterministic: every input comes from fixed seeds. The *compressed* bytes of the few chunks
written with nthreads=2 depend on thread timing (block order), but what they decompress to
does not. Everything under tests/data/ except README.md and the *-regressions directories is
deleted first.

See tests/data/README.md for the layout, the manifest columns and the sidecar JSON schema.
"""

import json
import os
import shutil
import sys

import numpy as np

import blosc2
import blosc
import bcolz

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "oracle"))  # common.py: shared chunk-making helpers
sys.path.insert(0, os.path.join(HERE, "fixtures"))  # the generator's parts

from common import sha256  # noqa: E402
from paths import DATA, EXAMPLES  # noqa: E402
from chunk_matrix import THREAD_LOG, gen_chunk_matrix  # noqa: E402
from sidecars import schunk_sidecar, write_sidecar  # noqa: E402
from frames import gen_frames  # noqa: E402
from bcolz_fixtures import gen_bcolz  # noqa: E402
from refuse import gen_refuse  # noqa: E402

blosc2.set_nthreads(1)
blosc.set_nthreads(1)


def versions():
    return {
        "blosc2": blosc2.__version__,
        "c_blosc2": blosc2.blosclib_version.split()[0],
        "blosc": blosc.__version__,
        "c_blosc": blosc.blosclib_version.split()[0] if hasattr(blosc, "blosclib_version") else "?",
        "bcolz": bcolz.__version__,
        "numpy": np.__version__,
    }


def clean_output():
    os.makedirs(DATA, exist_ok=True)
    for entry in os.listdir(DATA):
        # Kept: the README and inputs recorded by fuzzing and property tests.
        if entry == "README.md" or entry.endswith("-regressions"):
            continue
        p = os.path.join(DATA, entry)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.remove(p)


# --------------------------------------------------------------------------------------------
# f) examples/sample.b2nd


def gen_sample():
    os.makedirs(EXAMPLES, exist_ok=True)
    path = os.path.join(EXAMPLES, "sample.b2nd")
    if os.path.exists(path):
        os.remove(path)
    t = np.linspace(0, 4 * np.pi, 400)
    npa = np.stack([273.15 + 20 * np.sin(t), 273.15 + 15 * np.cos(t), 273.15 + t], axis=1)
    arr = blosc2.asarray(npa, urlpath=path, mode="w", chunks=(110, 3), blocks=(57, 3),
                         cparams={"codec": blosc2.Codec.ZSTD, "clevel": 5,
                                  "filters": [blosc2.Filter.SHUFFLE], "nthreads": 1})
    arr.attrs["units"] = "K"
    arr.attrs["source"] = "b2fs sample"
    arr = blosc2.open(path)
    car = schunk_sidecar("sample", path, arr.schunk, "cframe", "python-blosc2 4.14.1", arr=arr,
                         extra={"numpy_sha256": sha256(npa.tobytes())})
    car["source"] = "sample.b2nd"
    write_sidecar(EXAMPLES, "sample", car)
    return os.path.getsize(path)


def gen_containers():
    return {
        "frames": gen_frames(),
        "bcolz": gen_bcolz(),
        "refuse": gen_refuse(),
        "sample_bytes": gen_sample(),
    }


def main():
    clean_output()
    info = {"versions": versions()}
    rows, quirks = gen_chunk_matrix()
    info["chunks"] = len(rows)
    info["chunk_quirks"] = len(quirks)
    info["nthreads2_bstarts"] = THREAD_LOG
    info.update(gen_containers())
    with open(os.path.join(DATA, "GENERATED.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(info, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
