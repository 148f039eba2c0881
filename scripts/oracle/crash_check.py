"""Checks the sources of the crash test (tests/it/crash.rs): MANIFEST is a JSON list of runs
{kind, src, pristine, seed, acked}; each source must open with the reference library, keep
its number of chunks, every chunk must hold its old or its new content, and every chunk whose
fsync succeeded its new content. Prints the number of runs checked.

kind "ctable" (acked: number of acknowledged steps of column b: 200 rows, then chunks of 300
rows): bcolz opens the table, its length is a whole number of steps, at least the acked ones,
every row reads; column b holds the written rows, the other columns their own rows and then
their dflt. With a second argument `repaired`, every column must also have exactly the
table's length."""
import json
import sys

import numpy as np


def pattern(n, seed):
    i = np.arange(n, dtype=np.uint32)
    return ((i * 7 + seed) & 255).astype(np.uint8).tobytes()


def chunks_of(kind, path):
    if kind == "carr":
        import bcolz
        c = bcolz.open(path, mode="r")
        raw = c[:].tobytes()
        step = c.chunklen * c.dtype.itemsize
        return [raw[i:i + step] for i in range(0, len(raw), step)]
    import blosc2
    s = blosc2.open(path)
    return [s.decompress_chunk(i) for i in range(s.nchunks)]


LONGER = []  # ctable runs cut between two columns' commits (other columns longer)


def check_table(r, repaired):
    """Problems of one ctable run (empty when fine)."""
    import bcolz

    old = bcolz.open(r["pristine"], mode="r")
    n0 = len(old)
    try:
        t = bcolz.open(r["src"], mode="r")
        rows = t[:]
    except Exception as e:  # noqa: BLE001
        return ["does not open or read: %s" % e]
    n = len(t)
    steps = [n0, n0 + 200] + [n0 + 200 + 300 * k for k in range(1, 41)]
    if n not in steps:
        return ["length %d is not a whole number of steps" % n]
    done = steps.index(n)
    out = []
    if done < r["acked"]:
        out.append("length %d: %d steps, but %d were acknowledged" % (n, done, r["acked"]))
    if len(rows) != n:
        out.append("t[:] has %d rows, len %d" % (len(rows), n))
    written = pattern(200 * 8, r["seed"]) + b"".join(
        pattern(300 * 8, r["seed"] + k) for k in range(1, 41))
    want_b = old["b"][:].tobytes() + written[: (n - n0) * 8]
    if t["b"][:n].tobytes() != want_b:
        out.append("column b does not hold the written rows")
    if any(len(t[c]) > n for c in t.names):
        LONGER.append(r["src"])
    for c in t.names:
        if len(t[c]) < n or (repaired and len(t[c]) != n):
            out.append("column %s has %d rows, the table %d" % (c, len(t[c]), n))
        if c == "b":
            continue
        want = old[c][:]
        if t[c][:n0].tobytes() != want.tobytes():
            out.append("column %s lost its rows" % c)
        fill = np.full(n - n0, old[c].dflt, dtype=want.dtype)
        if t[c][n0:n].tobytes() != fill.tobytes():
            out.append("column %s: new rows are not its dflt" % c)
    return out


def main(manifest, repaired=False):
    runs = json.load(open(manifest))
    bad = []
    for r in runs:
        if r["kind"] == "ctable":
            bad += [(r["src"], p) for p in check_table(r, repaired)]
            continue
        old = chunks_of(r["kind"], r["pristine"])
        try:
            now = chunks_of(r["kind"], r["src"])
        except Exception as e:  # noqa: BLE001
            bad.append((r["src"], f"does not open: {e}"))
            continue
        appended = len(old) in r["acked"]
        if len(now) not in (len(old), len(old) + 1) or (appended and len(now) != len(old) + 1):
            bad.append((r["src"], f"{len(now)} chunks, expected {len(old)} (+1 appended: {appended})"))
            continue
        if len(now) == len(old) + 1:
            if r["kind"] == "carr":
                # bcolz: chunk boundaries of the old partial last chunk shift; compare rows
                pass
            elif now[-1] != pattern(len(old[0]), r["seed"] + len(old)):
                bad.append((r["src"], "the appended chunk holds something else"))
        for i, (o, n) in enumerate(zip(old, now)):
            new = pattern(len(o), r["seed"] + i)
            if n != o and n != new:
                bad.append((r["src"], f"chunk {i} is neither old nor new"))
            if i in r["acked"] and n != new:
                bad.append((r["src"], f"chunk {i}: fsync succeeded but the edit is missing"))
    if bad:
        for b in bad:
            print(*b, file=sys.stderr)
        sys.exit(1)
    if LONGER:
        print("%d ctable runs were cut between columns" % len(LONGER), file=sys.stderr)
    print(len(runs))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["repaired"])
