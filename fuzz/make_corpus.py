#!/usr/bin/env python3
"""Write the seed corpus of fuzz/fuzz_ops.c into fuzz/corpus/.

Each input is a sequence of 5-byte operations (op, a, b, c, d); see the
comment at the top of fuzz_ops.c. The seeds below each exercise one area
(heaps, arenas, cross-thread frees, faults, ...); the random ones mix
everything. The output is deterministic: running the script again writes
the same files.

    python3 fuzz/make_corpus.py [output-dir]
"""
import os
import random
import sys

# enum op in fuzz_ops.c, in order
OPS = """MALLOC CALLOC REALLOC ALIGNED FREE FREE_SIZED
HEAP_NEW HEAP_DESTROY HEAP_MALLOC HEAP_CALLOC HEAP_REALLOC HEAP_ALIGNED
ARENA_NEW ARENA_ALLOC ARENA_RESET ARENA_DESTROY
W_FREE W_REALLOC W_MALLOC DRAIN SYNC
CHECK COLLECT FAULTS FAULTS_OFF W_RESTART REALLOC_ZERO OWNS""".split()
OP = {name: i for i, name in enumerate(OPS)}

SMALL, MEDIUM, LARGE, HUGE = 100, 20000, 300000, 3 << 20


def enc_size(n):
    """The (b, c) bytes that decode_size() turns into n (rounded down to its step)."""
    if n < 256:
        v = n
    elif n < 4096:
        v = 0x4000 | n
    elif n // 8 <= 0x3FFF:
        v = 0x8000 | (n // 8)
    elif n // 32 < 0x3000:
        v = 0xC000 | (n // 32)
    elif n < (2 << 20):
        v = 0xF000 | (n // 1024)
    else:
        v = 0xF800 | min((n - (2 << 20)) // 1024, 0x7FF)
    return v & 0xFF, v >> 8


def op(name, a=0, size=0, d=0):
    b, c = enc_size(size)
    return bytes([OP[name], a & 0xFF, b, c, d & 0xFF])


def align_d(align):
    """d for ALIGNED / W_MALLOC-aligned: alignment 1 << (d % 23)."""
    return align.bit_length() - 1


SIZES = [0, 1, 8, 16, 24, 48, 100, 128, 255, 256, 1000, 1024, 4095, 4096, 8192, 9000, 16384, 40000, 65536,
         70000, 131064, 200000, 1 << 20, 2 << 20, 3 << 20, 4 << 20]


def seeds():
    s = {}
    s["malloc_free"] = b"".join(op("MALLOC", i, z) for i, z in enumerate(SIZES)) + \
        b"".join(op("CHECK", i) + op("FREE", i) for i in range(len(SIZES)))
    s["calloc"] = b"".join(op("CALLOC", i, z, i) for i, z in enumerate(SIZES)) + \
        b"".join(op("FREE_SIZED", i) for i in range(len(SIZES)))
    s["realloc_chain"] = op("MALLOC", 1, 10) + b"".join(op("REALLOC", 1, z) for z in SIZES + SIZES[::-1]) + \
        op("REALLOC_ZERO", 1)
    s["realloc_null"] = op("REALLOC", 3, 500) + op("REALLOC", 3, 70000) + op("REALLOC", 3, 5 << 20) + \
        op("REALLOC", 3, 16) + op("REALLOC", 3, 0)
    s["aligned"] = b"".join(op("ALIGNED", i, z, align_d(1 << (i % 23)))
                            for i, z in enumerate([1, 100, 4096, 5000, 70000, 300000, 3 << 20] * 4))
    s["free_sized"] = b"".join(op("MALLOC", i, 16 * i + 8) for i in range(40)) + \
        b"".join(op("FREE_SIZED", i) for i in range(0, 40, 2)) + b"".join(op("FREE", i) for i in range(1, 40, 2))
    s["owns"] = b"".join(op("MALLOC", i, z) + op("OWNS", i, z // 2 + 1) for i, z in enumerate(SIZES))
    heap = op("HEAP_NEW", 0) + op("HEAP_NEW", 1)
    heap += b"".join(op("HEAP_MALLOC", i, z, i % 2) for i, z in enumerate(SIZES))
    heap += b"".join(op("HEAP_CALLOC", 30 + i, z, 1) for i, z in enumerate([10, 1000, 30000, 200000]))
    heap += b"".join(op("HEAP_ALIGNED", 40 + i, 3000, i) for i in range(12))
    heap += b"".join(op("HEAP_REALLOC", i, 2 * z + 1, 1) for i, z in enumerate(SIZES[:10]))
    heap += op("FREE", 3) + op("FREE", 4) + op("HEAP_DESTROY", 0) + op("HEAP_MALLOC", 5, 100, 0)
    heap += op("HEAP_NEW", 0) + op("HEAP_MALLOC", 5, 100, 0) + op("HEAP_DESTROY", 1)
    s["heaps"] = heap
    s["heap_realloc_across"] = op("HEAP_NEW", 0) + op("HEAP_NEW", 1) + op("HEAP_MALLOC", 2, 500, 0) + \
        op("HEAP_REALLOC", 2, 480, 1) + op("HEAP_REALLOC", 2, 9000, 1) + op("HEAP_REALLOC", 2, 100, 0) + \
        op("MALLOC", 3, 700) + op("HEAP_REALLOC", 3, 70000, 1) + op("HEAP_DESTROY", 1) + op("HEAP_REALLOC", 4, 0, 0)
    ar = op("ARENA_NEW", 0, 100, 0) + b"".join(op("ARENA_ALLOC", 0, z, i) for i, z in enumerate(SIZES[:20]))
    ar += op("ARENA_RESET", 0) + b"".join(op("ARENA_ALLOC", 0, 3000, i) for i in range(30)) + op("ARENA_DESTROY", 0)
    ar += op("ARENA_NEW", 1, 1 << 20, 0) + op("ARENA_ALLOC", 1, 5 << 20, 0x80) + op("ARENA_ALLOC", 1, 10, 12)
    s["arenas"] = ar
    s["arena_on_heap"] = op("HEAP_NEW", 2) + op("ARENA_NEW", 0, 4000, 3) + \
        b"".join(op("ARENA_ALLOC", 0, 1000 * i + 1, i) for i in range(20)) + op("HEAP_MALLOC", 1, 64, 2) + \
        op("HEAP_DESTROY", 2) + op("ARENA_ALLOC", 0, 10, 0) + op("MALLOC", 1, 64)
    w = b"".join(op("W_MALLOC", 0, z, i) for i, z in enumerate(SIZES)) + op("SYNC")
    w += b"".join(op("W_FREE", i, 0, i) for i in range(0, 30, 3))
    w += b"".join(op("MALLOC", 40 + i, z) + op("W_REALLOC", 40 + i, z * 3 + 1) for i, z in enumerate(SIZES[:15]))
    w += op("DRAIN") + b"".join(op("FREE", i) for i in range(64))
    s["cross_thread"] = w
    s["cross_thread_heap"] = op("HEAP_NEW", 0) + b"".join(op("HEAP_MALLOC", i, z, 0) for i, z in enumerate(SIZES)) + \
        b"".join(op("W_FREE", i) for i in range(0, len(SIZES), 2)) + \
        b"".join(op("W_REALLOC", i, 77) for i in range(1, len(SIZES), 2)) + op("HEAP_DESTROY", 0) + \
        op("HEAP_NEW", 0) + op("HEAP_MALLOC", 1, 40, 0) + op("SYNC")
    # a 4 MiB-aligned block of a heap freed by the worker, then the heap allocates
    s["heap_aligned_remote"] = op("HEAP_NEW", 0) + op("HEAP_ALIGNED", 22, 100, 0) + op("HEAP_ALIGNED", 21, 3 << 20, 0) + \
        op("W_FREE", 22) + op("W_FREE", 21) + op("SYNC") + \
        b"".join(op("HEAP_MALLOC", i, 100000, 0) + op("FREE", i) for i in range(40))
    s["faults_after"] = b"".join(op("FAULTS", 0, 0, k) + b"".join(op("MALLOC", i, z) for i, z in enumerate(SIZES)) +
                                 op("W_MALLOC", 0, 3 << 20) + op("HEAP_NEW", 1) + op("HEAP_MALLOC", 50, 3 << 20, 1) +
                                 op("ARENA_NEW", 2, 100) + op("ARENA_ALLOC", 2, 4 << 20) + op("FAULTS_OFF")
                                 for k in (0, 1, 2, 3, 5, 8))
    s["faults_rate"] = op("FAULTS", 0, 0, 0x80 | 43) + \
        b"".join(op("MALLOC", i, z) + op("REALLOC", i, z * 2 + 1) + op("ALIGNED", 63 - i, z, i)
                 for i, z in enumerate(SIZES)) + op("FAULTS_OFF") + op("COLLECT")
    s["worker_restart"] = b"".join(op("W_MALLOC", i, 1000 * i) for i in range(10)) + op("W_RESTART") + \
        op("SYNC") + b"".join(op("MALLOC", i, 64) + op("W_FREE", i) for i in range(10)) + op("W_RESTART") + \
        op("DRAIN") + op("W_RESTART")
    s["collect"] = b"".join(op("MALLOC", i, 300000) for i in range(10)) + \
        b"".join(op("FREE", i) for i in range(10)) + op("COLLECT") + b"".join(op("MALLOC", i, 64) for i in range(10))
    s["huge"] = op("MALLOC", 0, 3 << 20) + op("REALLOC", 0, 4 << 20) + op("REALLOC", 0, 2 << 20) + \
        op("REALLOC", 0, 3 << 20) + op("ALIGNED", 1, 3 << 20, 22) + op("W_REALLOC", 1, 4 << 20) + op("SYNC")
    # a huge block grown and shrunk by a page or less at a time: its end
    # crosses the page the hardened build's guard occupied
    s["huge_page_steps"] = op("MALLOC", 0, (3 << 20) + 1024) + \
        b"".join(op("REALLOC", 0, (3 << 20) + 1024 * k) for k in (5, 6, 9, 13, 12, 4, 1)) + \
        op("W_REALLOC", 0, (3 << 20) + 1024 * 17) + op("SYNC") + op("CHECK", 0)
    return s


def random_seed(rng, n):
    out = b""
    for _ in range(n):
        name = rng.choice(OPS)
        size = rng.choice(SIZES) if rng.random() < 0.7 else rng.randrange(0, 70000)
        out += op(name, rng.randrange(256), size, rng.randrange(256))
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")
    os.makedirs(outdir, exist_ok=True)
    written = 0
    for name, data in seeds().items():
        with open(os.path.join(outdir, "seed-" + name), "wb") as f:
            f.write(data)
        written += 1
    rng = random.Random(5)
    for i in range(24):
        with open(os.path.join(outdir, "seed-random-%02d" % i), "wb") as f:
            f.write(random_seed(rng, rng.randrange(20, 160)))
        written += 1
    print("wrote %d inputs to %s" % (written, outdir))


if __name__ == "__main__":
    main()
