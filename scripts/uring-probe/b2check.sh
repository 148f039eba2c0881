#!/bin/bash
# Session 21 (BENCHMARKS.md "FUSE over io_uring (probe)"): run as root under /work/bin/quietlong.
# b2fs (main21 binary) with enable_uring Y and N: same bytes, and the same 4 KiB pread rate?
SRC=/work/main/bench-data/issue25/win.b2nd
for v in N Y N Y; do
  echo $v > /sys/module/fuse/parameters/enable_uring
  /tmp/b2fs-main21 mount -f -o ro $SRC /tmp/uring21-b2 >/tmp/uring21-b2.log 2>&1 &
  P=$!
  for i in $(seq 100); do mountpoint -q /tmp/uring21-b2 && break; sleep 0.05; done
  S=$(md5sum < /tmp/uring21-b2/array.npy | cut -c1-12)
  R=$(/tmp/uring21-reader rand /tmp/uring21-b2/array.npy 1 -1 5)
  echo "enable_uring=$v: md5 $S, warm 4 KiB preads $R/s"
  /tmp/b2fs-main21 umount /tmp/uring21-b2; wait $P
done
echo N > /sys/module/fuse/parameters/enable_uring
cat /sys/module/fuse/parameters/enable_uring
