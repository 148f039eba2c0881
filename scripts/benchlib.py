"""What the bench scripts share: a fresh foreground b2fs mount that is waited for by polling
the mount table, a measurement run in a fresh Python process that prints one JSON line, and
reading files whole in fixed-size reads; every measured child starts on memory as cold as the
one before it (`settle`).

The scripts import it by name (`import benchlib`): Python puts the running script's folder,
scripts/, first on the import path.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

POLL_SECONDS = 0.002  # how often the mount table is read while a mount comes up
MOUNT_TIMEOUT = 30.0  # seconds before a mount that has not come up ends the bench


def is_mounted(mp):
    """Whether the mount table of this process lists a mount at the absolute path MP."""
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mp for line in f)


def child_env():
    """The environment of every measured child: this one's, with OPENBLAS_NUM_THREADS=1 unless
    it is set. `import numpy` starts OpenBLAS's thread pool, whose worker spins on a core for
    about 0.1 s of CPU before it sleeps (2^28 cycles, OpenBLAS's default thread timeout): it
    ran through the first 40 ms of a mount child's timed scan (which starts right after its
    imports) and took a whole core from the daemon, while a python-blosc2 child spends that
    time importing blosc2. No child calls BLAS; with one BLAS thread there is no worker
    (BENCHMARKS.md, session 16: mount scans +20%, python-blosc2's unchanged)."""
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


# This kernel's free page reporting (virtio-balloon): blocks of 2 MiB and more that a process
# frees are handed back to the host about 2 s later, and the next process to touch them pays
# the host's fault again (0.5-0.9 GB/s against 6-9 GB/s for memory still backed).
REPORTED_KIB = "/sys/module/page_reporting/parameters/reported_kib"
SETTLE_QUIET = 2.2  # seconds without a report: one reporting period and a margin
SETTLE_MAX = 10.0


def settle():
    """Waits until the memory earlier children freed has been reported to the host (the
    counter REPORTED_KIB has not moved for SETTLE_QUIET seconds), so that every measured
    child starts on memory equally slow to touch, whatever ran before it. Without it the
    child that runs right after another one's exit gets that one's memory still backed:
    python-blosc2, which ran first in every round right after the previous pattern's b2fs
    reader, touched its 256 MiB output at 6-9 GB/s while the b2fs reader, started after a
    mount, touched its own at 0.5-0.9 GB/s (BENCHMARKS.md, "Session 33: both sides on cold
    memory"). No wait where the kernel does not report free pages, or with
    B2FS_BENCH_SETTLE=0."""
    if os.environ.get("B2FS_BENCH_SETTLE") == "0" or not os.path.exists(REPORTED_KIB):
        return
    start = time.monotonic()
    last, since = None, start
    while time.monotonic() - start < SETTLE_MAX:
        with open(REPORTED_KIB) as f:
            now = f.read().strip()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= SETTLE_QUIET:
            return
        time.sleep(0.05)
    print(f"benchlib.settle: freed memory still being reported after {SETTLE_MAX:.0f} s"
          " (something else is freeing memory): this child may start on warm memory",
          file=sys.stderr, flush=True)


def child_json(script, *args, flags=()):
    """Runs `python [FLAGS] SCRIPT ARGS...` in a fresh process (environment `child_env()`), once
    the memory earlier children freed has settled (`settle`); its stdout parsed as JSON."""
    settle()
    out = subprocess.run([sys.executable, *flags, script, *map(str, args)],
                         check=True, capture_output=True, text=True, env=child_env()).stdout
    return json.loads(out)


def read_files(paths, bs=1 << 20):
    """Reads each file of PATHS to its end in BS-byte reads into one buffer; the bytes read."""
    buf = memoryview(bytearray(bs))
    total = 0
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        while (n := os.readv(fd, [buf])) > 0:
            total += n
        os.close(fd)
    return total


class Mount:
    """`BINARY mount -f -o OPTS SOURCE MP` until closed: the constructor returns once the mount
    table lists MP (`mount_seconds` after the process start), and ends the bench if the
    process exits or MOUNT_TIMEOUT passes first. Without MP a temporary mount point is made
    and removed at close. Use it as a context manager."""

    def __init__(self, binary, source, mp=None, opts=("ro",)):
        self.binary = binary
        self.own_mp = mp is None
        self.mp = os.path.realpath(tempfile.mkdtemp() if mp is None else mp)
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen([binary, "mount", "-f", "-o", ",".join(opts), source, self.mp],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not is_mounted(self.mp):
            if self.proc.poll() is not None or time.perf_counter() - self.t0 > MOUNT_TIMEOUT:
                self.close()
                raise SystemExit(f"{binary}: the mount of {source} did not come up")
            time.sleep(POLL_SECONDS)
        self.mount_seconds = time.perf_counter() - self.t0

    @property
    def pid(self):
        """The daemon's process id."""
        return self.proc.pid

    def hwm_mib(self):
        """The daemon's peak resident set so far, in MiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(x.split()[1]) // 1024 for x in f if x.startswith("VmHWM"))

    def cpu_seconds(self):
        """The daemon's CPU time so far (user + system, every thread), in seconds."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        """Unmounts, waits for the daemon to exit, removes a temporary mount point."""
        if self.proc.poll() is None:
            subprocess.run([self.binary, "umount", self.mp], check=False, capture_output=True)
        self.proc.wait()
        if self.own_mp:
            os.rmdir(self.mp)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
