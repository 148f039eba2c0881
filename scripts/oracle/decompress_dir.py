#!/usr/bin/env python3
"""Reference decoder for the encoder interop test.

Usage: decompress_dir.py DIR

For every DIR/NAME.chunk (a chunk written by b2fs) with a sibling DIR/NAME.expect (the bytes it
must decode to), decompress the chunk with the C libraries: version-2 chunks (Blosc1) with
python-blosc (C-Blosc 1.x) `blosc.decompress`, all others with python-blosc2 (C-Blosc2)
`blosc2.decompress2`. Compares with the expected bytes and prints one JSON object:
{"passed": N, "failed": [{"name": ..., "error": ...}, ...]}. Exit status 0 either way; the
Rust test decides.
"""
import json
import os
import sys

import blosc
import blosc2


def main():
    d = sys.argv[1]
    blosc.set_nthreads(1)
    passed = 0
    failed = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".chunk"):
            continue
        stem = name[: -len(".chunk")]
        with open(os.path.join(d, name), "rb") as f:
            chunk = f.read()
        with open(os.path.join(d, stem + ".expect"), "rb") as f:
            expect = f.read()
        try:
            if chunk[0] == 2:
                got = blosc.decompress(chunk)
            else:
                got = blosc2.decompress2(chunk, nthreads=1)
        except Exception as e:  # noqa: BLE001 - any failure is reported
            failed.append({"name": stem, "error": repr(e)})
            continue
        if bytes(got) == expect:
            passed += 1
        else:
            diff = next(
                (i for i, (a, b) in enumerate(zip(got, expect)) if a != b),
                min(len(got), len(expect)),
            )
            failed.append(
                {
                    "name": stem,
                    "error": "mismatch: got %d bytes, expected %d, first difference at %d"
                    % (len(got), len(expect), diff),
                }
            )
    print(json.dumps({"passed": passed, "failed": failed}))


if __name__ == "__main__":
    main()
