"""
Writes the tests' small learnable corpus as llm.c shards: OUT/synth_train_000.bin (6000 tokens) and
OUT/synth_val_000.bin (3000 tokens), a short repeating cycle of ids below 500 (the fixtures'
vocabulary) with 10% noise, so that a tiny model learns it within a few steps. A fixed seed: the
same bytes every time (the tests compare runs on it).

  python3 dev/test/synth_shards.py OUT_DIR
"""
import random
import struct
import sys

if len(sys.argv) != 2:
    sys.exit("usage: python3 dev/test/synth_shards.py OUT_DIR")
rng = random.Random(1234)
for split, n in (("train", 6000), ("val", 3000)):
    toks = [(i % 16) * 31 if rng.random() < 0.9 else rng.randrange(499) for i in range(n)]
    with open(f"{sys.argv[1]}/synth_{split}_000.bin", "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack(f"<{n}H", *toks))
