#!/usr/bin/env python3
"""How slow fresh memory is to touch on this machine, and when freed memory turns cold.

    .venv/bin/python scripts/probe_cold_memory.py [ROUNDS]

On a VM whose kernel reports free pages to the host (virtio-balloon free page reporting:
/sys/module/page_reporting exists), blocks of 2 MiB and more that a process frees are handed
back to the host a moment later, and the next process to touch them pays the host's fault
again. This prints, for each gap between one process freeing 256 MiB and the next one
touching 256 MiB, the rate of that touch (fresh process each time), then how long after a free
the reporting counter moves. It is why every measured child of the bench scripts waits for
freed memory to settle first (`benchlib.settle`; BENCHMARKS.md, "Session 33: both sides on
cold memory").
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

TOUCH = """
import time, numpy as np
t = time.perf_counter(); a = np.empty(1 << 25); a[:] = 1
print(256 / (time.perf_counter() - t))
"""


def touch():
    """MiB/s of a fresh process's first write of 256 MiB (numpy: huge pages where allowed)."""
    out = subprocess.run([sys.executable, "-c", TOUCH], check=True, capture_output=True,
                         text=True, env=benchlib.child_env()).stdout
    return float(out)


def reported():
    with open(benchlib.REPORTED_KIB) as f:
        return int(f.read())


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for gap in (0.0, 0.5, 1.0, 2.0, 4.0):
        rates = []
        for _ in range(rounds):
            touch()  # frees 256 MiB at its exit
            time.sleep(gap)
            rates.append(touch())
        print(f"touch 256 MiB {gap:.1f} s after another process freed 256 MiB: "
              + ", ".join(f"{r:.0f}" for r in rates) + " MiB/s", flush=True)
    if not os.path.exists(benchlib.REPORTED_KIB):
        print("no free page reporting here: freed memory stays backed")
        return
    touch()
    t0, last = time.monotonic(), reported()
    while time.monotonic() - t0 < 6:
        now = reported()
        if now != last:
            print(f"{time.monotonic() - t0:.2f} s after the free: +{(now - last) // 1024} MiB"
                  " reported to the host")
            last = now
        time.sleep(0.05)


if __name__ == "__main__":
    main()
