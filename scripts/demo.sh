#!/usr/bin/env bash
# Demo: mount examples/sample.b2nd with a release build of b2fs, show the tree, unmount.
# Needs Linux with /dev/fuse; scripts/setup.sh installs fusermount3 and the python oracle.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cargo build --release --quiet
B2FS=target/release/b2fs

MNT=$(mktemp -d -t b2fs-demo.XXXXXX)
cleanup() {
    if grep -qs " $MNT " /proc/mounts; then "$B2FS" umount "$MNT" || fusermount3 -u -z "$MNT"; fi
    rmdir "$MNT" 2>/dev/null || true
}
trap cleanup EXIT

echo "\$ b2fs mount -o ro examples/sample.b2nd $MNT"
"$B2FS" mount -o ro examples/sample.b2nd "$MNT"

echo; echo "\$ find $MNT | sort"
(cd "$MNT" && find . | sort)

echo; echo "\$ ls -l $MNT/data"
ls -l "$MNT/data"

echo; echo "\$ cat meta/sizes"
cat "$MNT/meta/sizes"

echo; echo "\$ head -n 5 __attrs__"
head -n 5 "$MNT/__attrs__"

echo; echo "\$ python: numpy.fromfile(data/00000000.bin) == python-blosc2 decompress_chunk(0)"
.venv/bin/python - "$MNT" <<'PY'
import sys, numpy as np, blosc2
mnt = sys.argv[1]
a = blosc2.open("examples/sample.b2nd")
ref = np.frombuffer(a.schunk.decompress_chunk(0), dtype="<f8")
got = np.fromfile(f"{mnt}/data/00000000.bin", dtype="<f8")
print("equal:", np.array_equal(ref, got), "items:", got.size)
PY

echo; echo "\$ b2fs umount $MNT"
"$B2FS" umount "$MNT"
echo "unmounted"
