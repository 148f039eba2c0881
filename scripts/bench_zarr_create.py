"""The cost of making a new array through the Zarr view (BENCHMARKS.md, "Session 31"): a
read-write mount of an empty directory of sources, served by BIN in the foreground under
`/usr/bin/time -v`; `mkdir` and an array's `zarr.json` renamed in, as zarr-python does; the
rename is timed; the daemon's peak RSS is what `time -v` says after the unmount.

    bench_zarr_create.py BIN [ROUNDS] [FILL]    FILL: a JSON fill value ("NaN" by default)

The array: float64, 134,217,728 items (1 GiB), chunks of 33,554,432 items (256 MiB), so four
chunks of the fill value.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time


def one(binary, fill):
    with tempfile.TemporaryDirectory() as d:
        src, mp, log = f"{d}/src", f"{d}/mnt", f"{d}/time.log"
        os.mkdir(src)
        os.mkdir(mp)
        daemon = subprocess.Popen(
            ["/usr/bin/time", "-v", "-o", log, binary, "mount", "-f", src, mp],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            if os.path.ismount(mp):
                break
            time.sleep(0.05)
        doc = {
            "shape": [134217728],
            "data_type": "float64",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [33554432]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill,
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "attributes": {},
            "zarr_format": 3,
            "node_type": "array",
            "storage_transformers": [],
        }
        t = f"{mp}/zarr/big"
        os.mkdir(t)
        with open(f"{t}/zarr.json.x.partial", "w") as f:
            json.dump(doc, f)
        start = time.perf_counter()
        os.rename(f"{t}/zarr.json.x.partial", f"{t}/zarr.json")
        took = time.perf_counter() - start
        size = os.path.getsize(f"{src}/big.b2nd")
        subprocess.run(["fusermount3", "-u", mp], check=True)
        daemon.wait()
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(log).read())[1])
        return took, rss, size


def main():
    binary = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    fill = json.loads(sys.argv[3]) if len(sys.argv) > 3 else "NaN"
    runs = [one(binary, fill) for _ in range(rounds)]
    took = sorted(r[0] for r in runs)
    rss = sorted(r[1] for r in runs)
    print(
        f"{binary}: fill {fill!r}: create median {took[len(took) // 2] * 1000:.1f} ms "
        f"(min {took[0] * 1000:.1f}), peak RSS median {rss[len(rss) // 2] / 1024:.1f} MiB, "
        f"file {runs[0][2]} bytes"
    )


if __name__ == "__main__":
    main()
