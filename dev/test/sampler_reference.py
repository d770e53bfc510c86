#!/usr/bin/env python3
"""The sampling rule of dev/trainer/train_common.h (sample_token), written again with numpy, and the cases
dev/test/test_sampler.cpp checks the C++ against.

  /usr/bin/python3 dev/test/sampler_reference.py <cases.bin>

Writes fixed logits (vocabularies of 1 to 50257 tokens: ties at the top and in the middle, all
equal, a range that underflows every weight but one, broad and peaked at GPT-2's size), a grid of
settings (temperature 0, 0.5, 1, 2; top_k 0, 1, 5, 40; top_p 1, 0.9, 0.5) and fixed coins, with the
token this reference picks for each, into cases.bin (little-endian):

  int32 magic 20261128, int32 number of logit sets
  per set:  int32 V, float32 logits[V]
  int32 number of cases
  per case: int32 set, float32 temperature, int32 top_k, float32 top_p, float32 coin, int32 token

The rule (train_common.h's comment): temperature 0 is the argmax, the lowest id on ties; otherwise
weights exp(logit / T - max) in float64; top-k keeps the k largest logits (ties: the lower id);
top-p keeps the shortest prefix of that ranking whose running sum reaches p x the kept total; the
coin x the total of what is left picks the first kept id whose running sum (by id) exceeds it.
Only the summation order is shared with the C++ (by id; top-p's by rank), so that float64 sums
agree to the bit: the running sums here are Python's sequential float additions (itertools.
accumulate), the weights Python's math.exp, the C library's exp the C++ calls too (numpy's own
vectorized exp may differ in the last bit). The ranking is numpy's lexsort, the pick a bisection.
"""
import bisect
import itertools
import math
import os
import struct
import sys

import numpy as np

MAGIC = 20261128
TEMPERATURES = [0.0, 0.5, 1.0, 2.0]
TOP_KS = [0, 1, 5, 40]
TOP_PS = [1.0, 0.9, 0.5]


def logit_sets():
    rng = np.random.default_rng(2026)
    sets = [np.array([0.5]), np.array([1.0, 1.0]), np.array([1.0, 3.0, 3.0, 0.0, 3.0, -2.0, 1.0])]
    x = rng.normal(0.0, 2.0, 64)
    x[[10, 20, 30]] = x.max() + 0.5  # a three-way tie at the top
    x[41] = x[40]                    # and one in the middle
    sets.append(x)
    sets.append(rng.normal(0.0, 3.0, 500))       # the fixtures' vocabulary
    sets.append(np.zeros(1000))                  # every token tied
    sets.append(rng.permutation(np.linspace(-1e4, 1e4, 300)))  # every weight but the largest underflows
    broad = rng.normal(0.0, 1.0, 50257)          # a random init's logits: the nucleus is most of the vocabulary
    broad[[7, 50000]] = broad.max() + 0.25       # a tie at the top
    sets.append(broad)
    peaked = rng.normal(0.0, 2.0, 50257)         # a trained model's: a few tokens carry the mass
    top = rng.choice(50257, 20, replace=False)
    peaked[top] += np.linspace(14.0, 6.0, 20)
    peaked[top[3]] = peaked[top[4]]              # a tie among them
    sets.append(peaked)
    return [s.astype(np.float32) for s in sets]


def coins(rng, n_random):
    # random_f32's values: multiples of 2^-24 in [0, 1), the ends included
    fixed = [0.0, 0.25, 0.5, 0.75, 1.0 - 2.0 ** -24]
    drawn = (rng.integers(0, 2 ** 24, n_random) / 2.0 ** 24).tolist()
    return [np.float32(c) for c in fixed + drawn]


def weights(logits, temperature):
    z = logits.astype(np.float64) / np.float64(temperature)
    return np.array([math.exp(d) for d in (z - z.max()).tolist()])


def kept_and_cdf(logits, ranking, w, top_k, top_p):
    """(the kept ids, by id; the running sum of their weights, by id) of temperature > 0"""
    V = len(logits)
    keep = np.ones(V, dtype=bool)
    if 0 < top_k < V:
        keep[:] = False
        keep[ranking[:top_k]] = True
    if top_p < 1.0:
        total = list(itertools.accumulate(w[keep].tolist()))[-1]
        threshold = float(np.float64(top_p)) * total
        ranked = ranking[keep[ranking]]
        running = list(itertools.accumulate(w[ranked].tolist()))
        n = next((i + 1 for i, c in enumerate(running) if c >= threshold), len(ranked))
        keep[:] = False
        keep[ranked[:n]] = True
    kept = np.nonzero(keep)[0]
    return kept, list(itertools.accumulate(w[kept].tolist()))


def pick(kept, cdf, coin):
    target = float(np.float64(coin)) * cdf[-1]
    i = bisect.bisect_right(cdf, target)  # the first running sum above the target
    return int(kept[i]) if i < len(kept) else int(kept[-1])


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: sampler_reference.py <cases.bin>")
    rng = np.random.default_rng(1128)
    sets = logit_sets()
    cases = []
    for s, logits in enumerate(sets):
        ranking = np.lexsort((np.arange(len(logits)), -logits.astype(np.float64)))  # larger logit first, then lower id
        for temperature in TEMPERATURES:
            t32 = np.float32(temperature)
            w = weights(logits, t32) if temperature > 0 else None
            for top_k in TOP_KS:
                for top_p in TOP_PS:
                    p32 = np.float32(top_p)
                    if temperature > 0:
                        kept, cdf = kept_and_cdf(logits, ranking, w, top_k, p32)
                    for coin in coins(rng, 3):
                        # greedy: the first of equal maxima, whatever the filters
                        token = pick(kept, cdf, coin) if temperature > 0 else int(np.argmax(logits))
                        cases.append((s, t32, top_k, p32, coin, token))
    with open(sys.argv[1] + ".tmp", "wb") as f:
        f.write(struct.pack("<ii", MAGIC, len(sets)))
        for logits in sets:
            f.write(struct.pack("<i", len(logits)))
            f.write(logits.astype("<f4").tobytes())
        f.write(struct.pack("<i", len(cases)))
        for s, t, k, p, c, tok in cases:
            f.write(struct.pack("<ififfi", s, t, k, p, c, tok))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    print("  sampler reference: %d cases over %d logit sets (V = %s) written to %s" %
          (len(cases), len(sets), ", ".join(str(len(l)) for l in sets), sys.argv[1]))


if __name__ == "__main__":
    main()
