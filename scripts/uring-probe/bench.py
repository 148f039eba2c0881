#!/usr/bin/env python3
"""Same-run A/B of the uring-probe's two FUSE transports, with tmpfs as the reference.

    python3 bench.py ROUNDS [SECONDS [VARIANT,VARIANT,...]]   (root, under /work/bin/quietlong)

VARIANTS (below) name probe configurations; the first is the ratios' denominator.

Each round, in alternating order, mounts the probe fresh with the classic transport
(2 threads on cloned /dev/fuse fds, as b2fs's default) and with FUSE over io_uring (one
queue per CPU, each served by a thread pinned to it), and measures on the mount's 64 MiB
direct-I/O file: warm random 4 KiB preads (1 reader unpinned, 1 pinned to CPU 0, 2 readers),
dd bs=4k and bs=1M of the whole file, 4000 random page touches of a fresh MADV_RANDOM mapping
(each fault one FUSE READ), 1 MiB sequential preads (1 and 2 readers); then the
same on a tmpfs copy. enable_uring is set to Y only while an io_uring mount starts (the
kernel reads it at FUSE_INIT and at the first REGISTER) and put back to N right after.
Prints one line per round and measurement, then medians and ranges.
"""
import os, re, subprocess, sys, time, statistics, hashlib

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE, READER = "/tmp/uring21-probe", "/tmp/uring21-reader"
MNT = "/tmp/uring21-mnt"
TMPFS = "/dev/shm/uring21-ref.bin"
PARAM = "/sys/module/fuse/parameters/enable_uring"


def set_uring(v):
    with open(PARAM, "w") as f:
        f.write(v)


def readers(args_list):
    ps = [subprocess.Popen([READER] + a, stdout=subprocess.PIPE, text=True) for a in args_list]
    outs = []
    for p in ps:
        o, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"reader failed: {args_list}")
        outs.append(float(o.split()[0]))
    return sum(outs), outs


def dd(path, bs):
    r = subprocess.run(["dd", f"if={path}", "of=/dev/null", f"bs={bs}"],
                       capture_output=True, text=True, check=True)
    m = re.search(r"^(\d+) bytes.*copied, ([\d.e-]+) s", r.stderr, re.M)
    return int(m.group(1)) / float(m.group(2)) / 1e6


def measure(path, secs, seed):
    s = str(secs)
    res = {}
    res["rand1"] = readers([["rand", path, s, "-1", str(seed)]])[0]
    res["rand1pin0"] = readers([["rand", path, s, "0", str(seed + 1)]])[0]
    res["rand2"] = readers([["rand", path, s, "-1", str(seed + 2)],
                            ["rand", path, s, "-1", str(seed + 3)]])[0]
    res["dd4k"] = dd(path, "4k")
    res["dd1M"] = dd(path, "1M")
    res["dd4k/1M"] = res["dd4k"] / res["dd1M"]
    # a fresh mapping each time (mmap of a direct-I/O FUSE file drops its page cache)
    out = subprocess.run([READER, "mmap", path, "4000", "-1", str(seed + 4)],
                         capture_output=True, text=True, check=True).stdout.split()
    res["mmap4k"], res["mmap_faults"] = float(out[0]), float(out[1])
    res["seq1M"] = readers([["seq", path, str(1 << 20), "-1"]])[0]
    res["seq1M_2r"] = readers([["seq", path, str(1 << 20), "-1"],
                               ["seq", path, str(1 << 20), "-1"]])[0]
    return res


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


VARIANTS = {
    "classic": [],                                    # 2 threads, cloned fds (b2fs's default)
    "classic1pin0": ["--threads", "1", "--pin-dev", "0"],  # one thread on CPU 0
    "uring": ["--uring"],                             # plain SQE128 rings (libfuse's choice)
    "uringdefer": ["--uring", "--defer"],             # + SINGLE_ISSUER|DEFER_TASKRUN|COOP
    "uringhandoff": ["--uring", "--handoff"],         # answered and committed by a worker
    "classicw30": ["--work", "30"],                   # every READ spins 30 us (a decode)
    "uringw30": ["--uring", "--work", "30"],
    "classicw150": ["--work", "150"],                 # ~ a cold 4 KiB read's block decode
    "uringw150": ["--uring", "--work", "150"],
}


def run_mount(kind, secs, seed, check):
    args = [PROBE, MNT] + VARIANTS[kind]
    if "--uring" in args:
        set_uring("Y")
    try:
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stdout.readline().strip()
    finally:
        if "--uring" in args:
            set_uring("N")
    if not line.startswith("ready"):
        p.wait()
        raise SystemExit(f"{kind}: probe did not start: {line!r} {p.stderr.read()}")
    path = MNT + "/data"
    try:
        if check:
            with open(path, "rb") as f:
                digest = hashlib.md5(f.read()).hexdigest()
            check.setdefault("md5", digest)
            if check["md5"] != digest:
                raise SystemExit(f"{kind}: content differs")
        res = measure(path, secs, seed)
        res["daemon_cpu_s"] = cpu_s(p.pid)
    finally:
        subprocess.run(["umount", MNT], check=True)
    _, err = p.communicate(timeout=10)
    m = re.search(r"(\d+) requests over /dev/fuse, (\d+) over io_uring", err)
    res["reqs_dev"], res["reqs_ring"] = int(m.group(1)), int(m.group(2))
    if p.returncode:
        raise SystemExit(f"{kind}: probe exit {p.returncode}: {err}")
    return res


def main():
    rounds = int(sys.argv[1])
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 1.5
    kinds = sys.argv[3].split(",") if len(sys.argv) > 3 else ["classic", "uring"]
    os.makedirs(MNT, exist_ok=True)
    all_res = {}
    check = {}
    for r in range(rounds):
        order = kinds if r % 2 == 0 else kinds[::-1]
        for kind in order:
            res = run_mount(kind, secs, 1000 * r + 7, check if r == 0 else None)
            all_res.setdefault(kind, []).append(res)
            print(f"round {r + 1} {kind}: " + ", ".join(
                f"{k} {v:.3g}" for k, v in res.items()), flush=True)
        if not os.path.exists(TMPFS):
            set_uring("N")
            p = subprocess.Popen([PROBE, MNT], stdout=subprocess.PIPE, text=True)
            p.stdout.readline()
            subprocess.run(["cp", MNT + "/data", TMPFS], check=True)
            subprocess.run(["umount", MNT], check=True)
            p.wait()
        res = measure(TMPFS, secs, 1000 * r + 7)
        all_res.setdefault("tmpfs", []).append(res)
        print(f"round {r + 1} tmpfs: " + ", ".join(f"{k} {v:.3g}" for k, v in res.items()),
              flush=True)
    print("\nmedian (min-max) over", rounds, "rounds")
    keys = ["rand1", "rand1pin0", "rand2", "dd4k", "dd1M", "dd4k/1M", "mmap4k", "mmap_faults",
            "seq1M", "seq1M_2r",
            "daemon_cpu_s", "reqs_dev", "reqs_ring"]
    for kind in kinds + ["tmpfs"]:
        rs = all_res[kind]
        print(kind + ": " + "; ".join(
            f"{k} {statistics.median([x[k] for x in rs]):.4g} "
            f"({min(x[k] for x in rs):.4g}-{max(x[k] for x in rs):.4g})"
            for k in keys if k in rs[0]))
    print("per-round ratios: median (min-max)")
    pairs = [(a, kinds[0], k) for a in kinds[1:]
             for k in ["rand1", "rand1pin0", "rand2", "dd4k", "dd1M", "mmap4k", "seq1M",
                       "seq1M_2r"]]
    pairs += [(a, "tmpfs", k) for k in ["rand1", "rand1pin0", "rand2", "mmap4k"] for a in kinds]
    for num, den, k in pairs:
        q = [a[k] / b[k] for a, b in zip(all_res[num], all_res[den])]
        print(f"  {k} {num}/{den}: {statistics.median(q):.3f} ({min(q):.3f}-{max(q):.3f})")
    for kind in kinds + ["tmpfs"]:
        q = [x["dd4k/1M"] for x in all_res[kind]]
        print(f"  dd4k/1M {kind}: {statistics.median(q):.3f} ({min(q):.3f}-{max(q):.3f})")


if __name__ == "__main__":
    try:
        main()
    finally:
        set_uring("N")
        if os.path.ismount(MNT):
            subprocess.run(["umount", "-l", MNT])
