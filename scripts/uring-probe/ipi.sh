#!/bin/bash
# Session 21 (BENCHMARKS.md "FUSE over io_uring (probe)"): run as root under /work/bin/quietlong.
# per-op context switches, IPIs and idle entries while one unpinned reader does 4 KiB preads
for round in 1 2 3; do
for v in classic uring; do
  A=""; [ $v = uring ] && A="--uring" && echo Y > /sys/module/fuse/parameters/enable_uring
  rm -f /tmp/uring21-p.out  # (the recorded run lacked this: one round read a stale "ready")
  /tmp/uring21-probe /tmp/uring21-mnt $A > /tmp/uring21-p.out 2>/tmp/uring21-p.err &
  P=$!
  for i in $(seq 100); do grep -q ready /tmp/uring21-p.out && break; sleep 0.02; done
  echo N > /sys/module/fuse/parameters/enable_uring
  OUT=$(perf stat -x, -a -e context-switches,irq_vectors:reschedule_entry,irq_vectors:call_function_single_entry,power:cpu_idle -- /tmp/uring21-reader rand /tmp/uring21-mnt/data 1 -1 11 2>/tmp/uring21-ps.txt)
  echo "round $round $v: $OUT ops/s; $(awk -F, '{printf "%s %s; ", $3, $1}' /tmp/uring21-ps.txt)"
  umount /tmp/uring21-mnt; wait $P
done; done
