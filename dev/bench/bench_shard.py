"""
Writes the benchmark's llm.c token shard: N random GPT-2 token ids (seed 1234, so every run and
every peer reads the same bytes; throughput does not depend on the text). A shard of that size
already there is kept.

  python3 dev/bench/bench_shard.py PATH NUM_TOKENS
"""
import os
import sys

import numpy as np

if len(sys.argv) != 3:
    sys.exit("usage: python3 dev/bench/bench_shard.py PATH NUM_TOKENS")
path, n = sys.argv[1], int(sys.argv[2])
if os.path.exists(path) and os.path.getsize(path) == 1024 + 2 * n:
    sys.exit(0)
header = np.zeros(256, dtype=np.int32)
header[:3] = (20240520, 1, n)
ids = np.random.default_rng(1234).integers(0, 50257, size=n, dtype=np.uint16)
with open(path + ".tmp", "wb") as f:
    f.write(header.tobytes())
    f.write(ids.tobytes())
os.replace(path + ".tmp", path)
