"""Who commits at close (issue 21), through a real read-write mount (tests/it/fork.rs).

    fork.py gen SRC            make SRC: a 1-D int32 b2nd of 3 chunks of 131,072 items
    fork.py run SRC MNT CASE   a writer opens MNT/data/00000001.bin, writes its first half,
                               lets another process close a copy of the descriptor (CASE:
                               fork, pass_fds, shell, child_writes), checks with python-blosc2
                               that the source still holds the OLD chunk, writes the rest,
                               closes, and checks that the source holds the whole NEW chunk
    fork.py refused SRC MNT    an edit the commit refuses (half a middle chunk after O_TRUNC):
                               a forked child's close returns 0, the opener's close EINVAL,
                               and the source keeps the old chunk

Prints "ok CASE" on success; any failed check raises (non-zero exit, message on stderr).
"""
import os
import subprocess
import sys

import numpy as np

C = 131072  # items per chunk
ITEM = 4


def gen(src):
    import blosc2

    blosc2.asarray(np.arange(3 * C, dtype=np.int32), chunks=(C,), blocks=(8192,),
                   urlpath=src, mode="w",
                   cparams=blosc2.CParams(codec=blosc2.Codec.ZSTD, clevel=1))


def stored_chunk1(src):
    """Chunk 1 of the source as python-blosc2 reads it from the file itself."""
    import blosc2

    return np.asarray(blosc2.open(src, mode="r")[C:2 * C])


def run(src, mnt, case):
    path = os.path.join(mnt, "data", "00000001.bin")
    old = stored_chunk1(src)
    assert (old == np.arange(C, 2 * C, dtype=np.int32)).all(), "unexpected fixture"
    new = (-np.arange(C, dtype=np.int32) - 7).astype(np.int32)
    raw = new.tobytes()
    half = len(raw) // 2
    fd = os.open(path, os.O_RDWR)
    assert os.pwrite(fd, raw[:half], 0) == half
    wrote_second_half = False
    if case == "fork":
        pid = os.fork()
        if pid == 0:
            # The child's exit closes its copy of the descriptor: the kernel sends FLUSH.
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert status == 0
    elif case == "pass_fds":
        subprocess.run([sys.executable, "-c", "import os, sys; os.close(int(sys.argv[1]))",
                        str(fd)], pass_fds=[fd], check=True)
    elif case == "shell":
        # A shell given the descriptor: a command substitution and a pipeline fork subshells
        # that exit (each closes its copy), then the shell itself exits.
        subprocess.run(["sh", "-c", 'x=$(echo sub); echo "$x" | cat > /dev/null; true'],
                       pass_fds=[fd], check=True)
    elif case == "child_writes":
        # A process the descriptor was passed to writes the second half through it and exits:
        # its close commits nothing either; the opener's close commits both halves.
        code = ("import os, sys; fd = int(sys.argv[1]); data = sys.stdin.buffer.read(); "
                "assert os.pwrite(fd, data, int(sys.argv[2])) == len(data)")
        subprocess.run([sys.executable, "-c", code, str(fd), str(half)], input=raw[half:],
                       pass_fds=[fd], check=True)
        wrote_second_half = True
    else:
        raise SystemExit(f"unknown case {case}")
    mid = stored_chunk1(src)
    changed = int((mid != old).sum())
    assert changed == 0, f"{case}: the other process's close committed {changed} changed items"
    if not wrote_second_half:
        assert os.pwrite(fd, raw[half:], half) == len(raw) - half
    os.close(fd)
    after = stored_chunk1(src)
    assert (after == new).all(), f"{case}: {int((after != new).sum())} items not committed"
    print("ok", case)


def refused(src, mnt):
    path = os.path.join(mnt, "data", "00000001.bin")
    old = stored_chunk1(src)
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"\x01" * (C * ITEM // 2))
    pid = os.fork()
    if pid == 0:
        try:
            os.close(fd)
            os._exit(0)
        except OSError:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert status == 0, "the child's close reported an error of a commit it did not ask for"
    assert (stored_chunk1(src) == old).all()
    try:
        os.close(fd)
    except OSError as e:
        assert e.errno == 22, e
    else:
        raise AssertionError("the opener's close of half a middle chunk succeeded")
    assert (stored_chunk1(src) == old).all()
    print("ok refused")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "refused":
        refused(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
