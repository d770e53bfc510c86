#!/usr/bin/env python3
"""Seeds for the fuzz targets of dev/fuzz/, made from the project's real files (plain python3, no numpy).

    python3 dev/fuzz/make_seeds.py OUT_DIR [--all]

writes OUT_DIR/<target>/<name> for every target whose source files exist, small enough to keep
fuzzing fast: checkpoint headers of the generated fixtures (dev/fixtures/*_model.bin, header + file
size, see fuzz_checkpoint.cpp), debug states cut down to their small records, an Austen shard cut
to 2000 tokens, the first tokens of the GPT-2 vocabulary (gpt2_tokenizer.bin, encoder.json +
vocab.bpe) and slices of text; plus synthetic ones that need no file. Without --all a few fixtures
(what dev/fuzz/corpus/ keeps, committed); with --all every fixture (what make test adds from the
files it generated). Prints one line per target with the number of seeds written.
"""
import glob
import json
import os
import struct
import sys


def write(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def ints(*v):
    return struct.pack("<%di" % len(v), *v)


def checkpoint_seeds(out, every):
    n = 0
    models = sorted(glob.glob("dev/fixtures/*_model.bin"))
    if not every:  # one per scheme where there is one, plus llm.c's v3
        keep, seen = [], set()
        for m in models:
            base = os.path.basename(m)
            scheme = base.split("_tiny")[0] if "_tiny" in base else None
            if scheme and (scheme not in seen or "_v3_" in base):
                seen.add(scheme)
                keep.append(m)
        models = keep
    for m in models:
        with open(m, "rb") as f:
            header = f.read(1024)
        write(out, "checkpoint", os.path.basename(m), header + struct.pack("<q", os.path.getsize(m)))
        n += 1
    return n


# the fixed model of fuzz_state.cpp: standard, n_layer 1, n_head 1, n_embd 4, T 4, vocab 8/8
STATE_SHAPE = dict(L=1, H=1, C=4, T=4, V=8, Vp=8)


def state_seeds(out):
    s = STATE_SHAPE
    L, C, T, Vp = s["L"], s["C"], s["T"], s["Vp"]
    np_ = Vp * C + T * C + L * (C + C + 3 * C * C + 3 * C + C * C + C + C + C + 4 * C * C + 4 * C + 4 * C * C + C) + C + C
    n = 0
    for master in (0, 1):
        h = [0] * 256
        h[0:13] = [20240330, 1, 7, 0, master, 2, 4, 1, np_ & 0xFFFFFFFF, np_ >> 32, 12345, 678, 0]
        h[16:28] = [T, s["V"], L, s["H"], C, Vp, 0, s["H"], 4 * C, 1, 1, 0]
        if master:  # a recorded schedule ([14] = 1): 10 steps, lr 6e-4, warmup 2, the trainers' defaults
            h[14:16] = [1, 10]
            fbits = lambda x: struct.unpack("<i", struct.pack("<f", x))[0]
            h[28:36] = [fbits(6e-4), 2, fbits(0.1), fbits(0.1), fbits(0.9), fbits(0.95), fbits(1e-8), fbits(1.0)]
        loader = struct.pack("<8Q", (0x444C5354 << 32) | 1, 1337, 0, 0, 3, 100, 2 | (4 << 24), 0xABCDEF)
        tensors = struct.pack("<%df" % (np_ * (2 + master)), *([0.001] * (np_ * (2 + master))))
        write(out, "state", "state_master%d.bin" % master, ints(*h) + loader + tensors)
        n += 1
    return n


def debug_state_seeds(out, every):
    def record(name, dtype, dims, values):
        meta = [dtype, len(dims)] + dims + [1] * (4 - len(dims)) + [0, 0]
        fmt = {0: "f", 1: "i", 2: "d"}[dtype]
        return name.encode().ljust(64, b"\0") + ints(*meta) + struct.pack("<%d%s" % (len(values), fmt), *values)
    recs = [record("inputs", 1, [1, 3], [1, 2, 3]), record("loss", 0, [1], [2.5]), record("adamw", 2, [2], [0.1, 0.9])]
    write(out, "debug_state", "synthetic.bin", ints(20240327, 3, 1, 3, len(recs), 1, *([0] * 250)) + b"".join(recs))
    n = 1
    files = sorted(glob.glob("dev/fixtures/*_debug.bin"))
    for path in files if every else [f for f in files if "standard_tiny" in f]:
        # the file's own header and records, keeping only the small records
        with open(path, "rb") as f:
            data = f.read()
        h = list(struct.unpack("<256i", data[:1024]))
        off, kept = 1024, []
        for _ in range(h[4]):
            meta = struct.unpack("<8i", data[off + 64:off + 96])
            numel = meta[2] * meta[3] * meta[4] * meta[5]
            size = 96 + numel * (8 if meta[0] == 2 else 4)
            if numel <= 64:
                kept.append(data[off:off + size])
            off += size
        h[4] = len(kept)
        write(out, "debug_state", os.path.basename(path), ints(*h) + b"".join(kept))
        n += 1
    return n


def dataloader_seeds(out):
    # control (4 bytes: flags, B-1, T-1, batches-1; see fuzz_dataloader.cpp), 64 state bytes, the shard
    def seed(name, flags, B, T, batches, tokens, state=b"\0" * 64):
        shard = ints(20240520, 1, len(tokens), *([0] * 253)) + struct.pack("<%dH" % len(tokens), *tokens)
        write(out, "dataloader", name, bytes([flags, B - 1, T - 1, batches - 1]) + state + shard)
    state = struct.pack("<8Q", (0x444C5354 << 32) | 1, 7, 1, 0, 2, 0, 0, 0)
    seed("tiny_sequential.bin", 0, 2, 4, 4, list(range(40)))
    seed("tiny_shuffled_two_shards.bin", 1 | 2 | 4, 1, 3, 8, list(range(50, 80)), state)
    n = 2
    shards = sorted(glob.glob("dev/data/austen/austen_val_*.bin"))
    if shards:
        with open(shards[0], "rb") as f:
            data = f.read(1024 + 2 * 2000)
        tokens = list(struct.unpack("<%dH" % ((len(data) - 1024) // 2), data[1024:]))
        seed("austen_val_2000.bin", 2 | 4, 4, 64, 8, tokens, state)
        n += 1
    return n


def vocab_seeds(out, merges_kept=64):
    n = 0
    d = "dev/data/gpt2"
    if os.path.exists(d + "/gpt2_tokenizer.bin"):
        with open(d + "/gpt2_tokenizer.bin", "rb") as f:
            data = f.read()
        h = list(struct.unpack("<256I", data[:1024]))
        off, toks = 1024, []
        for _ in range(h[2]):
            toks.append(data[off:off + 1 + data[off]])
            off += 1 + data[off]
        eot = toks[h[3] if h[1] == 2 else 50256]
        for k in (0, merges_kept):  # the 256 bytes, k merges, then <|endoftext|>
            h2 = [20240328, 2, 256 + k + 1, 256 + k] + [0] * 252
            write(out, "tokenizer_bin", "gpt2_first_%d.bin" % (256 + k), ints(*h2) + b"".join(toks[:256 + k]) + eot)
            n += 1
        h1 = [20240328, 1, 256 + merges_kept] + [0] * 253
        write(out, "tokenizer_bin", "gpt2_v1_first.bin", ints(*h1) + b"".join(toks[:256 + merges_kept]))
        n += 1
    if os.path.exists(d + "/encoder.json") and os.path.exists(d + "/vocab.bpe"):
        with open(d + "/encoder.json", encoding="utf-8") as f:
            enc = json.load(f)
        with open(d + "/vocab.bpe", encoding="utf-8") as f:
            bpe = f.read().split("\n")
        by_id = sorted(enc.items(), key=lambda kv: kv[1])
        for k in (0, merges_kept):
            small = {t: i for t, i in by_id[:256 + k]}
            small["<|endoftext|>"] = 256 + k
            text = json.dumps(small).encode() + b"\0" + ("\n".join(bpe[:1 + k]) + "\n").encode()
            write(out, "bpe_files", "gpt2_first_%d.bin" % (256 + k), text)
            n += 1
    return n


def text_seeds(out):
    n = 0
    texts = [b"Hello world, it's 2024! <|endoftext|>Caf\xc3\xa9   \n\n  x", b"\xff\xfe\xc0\x80 \xed\xa0\x80 \xf4\x90\x80\x80",
             b"'s 're 've 'll 'd 'm 't \t\r\n\xc2\x85\xef\xbb\xbf\xe3\x80\x80 123 \xd9\xa3"]
    for p in sorted(glob.glob("dev/data/austen/text/*.txt"))[:2] + ["dev/tokenizer/torture.txt"]:
        if os.path.exists(p):
            with open(p, "rb") as f:
                data = f.read()
            texts += [data[:1500], data[len(data) // 2:len(data) // 2 + 1500]]
    for i, t in enumerate(texts):
        write(out, "bpe_text", "text_%02d.txt" % i, t)
        n += 1
    return n


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: python3 dev/fuzz/make_seeds.py OUT_DIR [--all]")
    out, every = sys.argv[1], "--all" in sys.argv[2:]
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    counts = {
        "checkpoint": checkpoint_seeds(out, every), "state": state_seeds(out),
        "debug_state": debug_state_seeds(out, every), "dataloader": dataloader_seeds(out),
        "vocab (tokenizer_bin, bpe_files)": vocab_seeds(out), "bpe_text": text_seeds(out),
    }
    for target, n in counts.items():
        print("make_seeds: %s: %d seeds in %s" % (target, n, out))


main()
