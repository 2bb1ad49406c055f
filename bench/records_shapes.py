#!/usr/bin/env python3
"""The four record shapes of issue 21's scale target, as CSV files `tirc plan --records` reads.

Seeded and deterministic: the same arguments always write the same bytes. Sizes are
tensor-like, 64 B to 4 MiB log-uniform. Lifetimes are half-open `[lower, upper)` as in the
public suites (csv.rs).

  chain            each tensor consumed by the next operator only: live set of 2
  uniform          n operators, a tensor starting at each of n uniformly random operators
                   and living 1 to 32 operators (uniform): live set ~16 whatever n
  fan_out_bounded  Inception-like blocks (one input fanned out to 8 branches of 3 operators,
                   joined by a concat), plus 1% long-lived tensors of at most 1,000 operators:
                   the live set is bounded as n grows
  fan_out_growing  the same blocks with 1% long-lived tensors of up to n / 10 operators: the
                   live set grows with n, which makes every Alg. 3 placement do more work per
                   record as n grows

Usage: bench/records_shapes.py SHAPE N OUT.csv [--seed S]
"""
import argparse
import os
import random
import sys
import tempfile

SHAPES = ("chain", "uniform", "fan_out_bounded", "fan_out_growing")


def size(rng):
    shift = 6 + rng.randrange(17)
    return (1 << shift) + rng.randrange(1 << shift)


def chain(n, rng):
    for i in range(n):
        yield i, i + 2, size(rng)


def uniform(n, rng):
    for _ in range(n):
        first = rng.randrange(n)
        yield first, first + 1 + rng.randrange(32), size(rng)


def fan_out(n, rng, long_max):
    """Blocks of 25 records; every 100th record is replaced by a long-lived one."""
    op = 0
    count = 0
    while True:
        join = op + 1 + 8 * 3
        block = [(op, join + 1)]
        for branch in range(8):
            start = op + 1 + branch * 3
            block += [(start, start + 2), (start + 1, start + 3), (start + 2, join + 1)]
        for lower, upper in block:
            if count == n:
                return
            if rng.randrange(100) == 0:
                upper = lower + 1 + rng.randrange(long_max)
            yield lower, upper, size(rng)
            count += 1
        op = join


def records(shape, n, seed):
    rng = random.Random(seed)
    if shape == "chain":
        return chain(n, rng)
    if shape == "uniform":
        return uniform(n, rng)
    if shape == "fan_out_bounded":
        return fan_out(n, rng, 1000)
    return fan_out(n, rng, max(1, n // 10))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shape", choices=SHAPES)
    p.add_argument("n", type=int)
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=21)
    a = p.parse_args()
    if a.n < 0:
        p.error("N must not be negative")
    lines = ["id,lower,upper,size\n"]
    lines += [f"{i},{lo},{up},{s}\n" for i, (lo, up, s) in enumerate(records(a.shape, a.n, a.seed))]
    # Written atomically: a temporary file in the same directory, renamed over OUT.
    out_dir = os.path.dirname(os.path.abspath(a.out))
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".records_shapes.")
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "w") as f:
            f.writelines(lines)
        os.replace(tmp, a.out)
    except BaseException:
        os.unlink(tmp)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
