#!/bin/bash
# Session 21 (BENCHMARKS.md "FUSE over io_uring (probe)"): run as root under /work/bin/quietlong.
# The pipe ping-pong floor: same vCPU, across the two vCPUs, unpinned; 8 rounds of 1 s.
for r in 1 2 3 4 5 6 7 8; do
  echo "round $r: same-cpu $(/tmp/uring21-reader pingpong 0 0 1) cross-cpu $(/tmp/uring21-reader pingpong 0 1 1) unpinned $(/tmp/uring21-reader pingpong -1 -1 1)"
done
