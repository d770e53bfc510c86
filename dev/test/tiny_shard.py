"""
Writes a small llm.c token shard of random ids below 500 (the fixtures' vocabulary), for the
trainer runs of the tests, the sanitizers and the diagnostics: the same seed gives the same bytes.

  python3 dev/test/tiny_shard.py PATH NUM_TOKENS SEED
"""
import os
import random
import struct
import sys

if len(sys.argv) != 4:
    sys.exit("usage: python3 dev/test/tiny_shard.py PATH NUM_TOKENS SEED")
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
with open(path + ".tmp", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *[rng.randrange(500) for _ in range(n)]))
os.replace(path + ".tmp", path)
