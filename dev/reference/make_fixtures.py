"""
Generates the test fixtures: for each configuration a checkpoint (<name>_model.bin) and the debug
state of a random batch plus 10 AdamW steps (<name>_debug.bin), made by train_gpt2.py, and two
tables:

  manifest.tsv   <name> <scheme> <model path> <debug path>           (paths relative to the repo root)
  forbidden.tsv  <scheme> <n_layer> <n_embd> <n_head> <n_kv_head> <mlp> <bias>
                 scheme/shape combinations every implementation must refuse at start-up

  /usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures [--jobs N]

The fixtures are independent (each has its own seed): --jobs processes make them side by side, one
torch thread each (default: the CPU count, at most 8). Their tensors are tiny, so one thread per
fixture wastes less than two threads on one.
"""

import argparse
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_gpt2 as ref  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The tiny shape: 2 layers, C 64, 4 heads, T 64, vocab 500 padded to 512, biases, tied, MLP 4C.
TINY = dict(num_layers=2, channels=64, num_heads=4, num_kv_heads=4, max_seq_len=64, vocab_size=500,
            padded_vocab_size=512, mlp_hidden=256, use_bias=1, tied_head=1, attn_scale=0.0)
B = 4


def fixtures():
    """(name, scheme, shape overrides of TINY, T), all written as version 6; the seed is 1000 + the list index."""
    out = []
    for scheme in ref.SCHEMES:
        out.append((scheme + "_tiny", scheme, {}, 64))
    for scheme in ("standard", "q_identity", "kv_shared", "q_residual"):  # the schemes that allow GQA
        out.append((scheme + "_gqa2", scheme, dict(num_kv_heads=2), 64))
        out.append((scheme + "_mqa", scheme, dict(num_kv_heads=1), 64))
    out += [
        ("standard_nobias", "standard", dict(use_bias=0), 64),
        ("q_identity_nobias", "q_identity", dict(use_bias=0), 64),  # the seed 000 setting
        ("standard_untied", "standard", dict(tied_head=0), 64),
        ("q_residual_untied_nobias", "q_residual", dict(tied_head=0, use_bias=0), 64),
        ("standard_hd12", "standard", dict(channels=48, mlp_hidden=192), 64),  # hd not a power of two
        ("standard_mlp224_t48", "standard", dict(mlp_hidden=224), 48),  # MLP 3.5C, T < max_seq_len
        ("q_identity_scale", "q_identity", dict(attn_scale=0.2), 64),  # overrides the default 1/16
        ("kv_shared_gqa2_scale", "kv_shared", dict(num_kv_heads=2, attn_scale=0.3), 64),
    ]
    # Head sizes of the fused attention kernels (64 and 128), which tile 64 query rows x 64 keys:
    # T 80 is two tiles, the second one partial, and below max_seq_len 128. Appended, so that the
    # fixtures above keep their seeds.
    for scheme in ref.SCHEMES:
        out.append((scheme + "_hd64", scheme, dict(channels=128, num_heads=2, num_kv_heads=2, mlp_hidden=512,
                                                   max_seq_len=128), 80))
    # C 256 for 4 heads of 64 (GQA distinct from MQA) or 2 of 128. MLP 2C: at 4C the MLP would be 60% of
    # their FLOPs (the attention they are for, 2%), and each would take 1.8x the time to generate
    c256 = dict(channels=256, num_heads=4, mlp_hidden=512, max_seq_len=128)
    out += [
        ("standard_hd64_gqa2", "standard", dict(c256, num_kv_heads=2), 80),
        ("standard_hd64_mqa", "standard", dict(c256, num_kv_heads=1), 80),
        ("kv_shared_hd64_gqa2", "kv_shared", dict(c256, num_kv_heads=2), 80),
        ("q_identity_hd64_mqa", "q_identity", dict(c256, num_kv_heads=1), 80),
        ("q_residual_hd64_gqa2", "q_residual", dict(c256, num_kv_heads=2), 80),
        ("standard_hd128", "standard", dict(c256, num_heads=2, num_kv_heads=2), 80),
    ]
    return out


# Combinations every implementation must refuse (gpt2_config_check): n_kv_head < n_head where the
# scheme ties k or v heads to the query heads, an odd C for q_residual, and the generic shape errors.
FORBIDDEN = [
    ("k_identity", 2, 64, 4, 2, 256, 1), ("k_identity", 2, 64, 4, 1, 256, 1),
    ("v_identity", 2, 64, 4, 2, 256, 1), ("v_identity", 2, 64, 4, 1, 256, 1),
    ("qk_shared", 2, 64, 4, 2, 256, 1), ("qk_shared", 2, 64, 4, 1, 256, 1),
    ("qkv_shared", 2, 64, 4, 2, 256, 1), ("qkv_shared", 2, 64, 4, 1, 256, 1),
    ("q_residual", 2, 63, 3, 3, 252, 1),  # hd 21 is fine; W1 cannot map 63 to 63/2
    ("standard", 2, 64, 4, 3, 256, 1),    # n_kv_head does not divide n_head
    ("kv_shared", 2, 64, 4, 3, 256, 1),
    ("standard", 2, 64, 4, 0, 256, 1),    # no kv heads
    ("standard", 2, 64, 5, 5, 256, 1),    # C not divisible by H
    ("q_identity", 2, 64, 6, 6, 256, 0),
]


def make_one(job):
    """(index, out_dir) -> (name, scheme, model path, debug path, the fixture's report line)"""
    index, out_dir = job
    ref.torch.set_num_threads(1)
    name, scheme, shape, T = fixtures()[index]
    seed = 1000 + index
    t0 = time.time()
    config = ref.Config(scheme=ref.SCHEMES.index(scheme), **dict(TINY, **shape))
    model = ref.build_model(config, seed=seed, test_init=True)
    model_path = os.path.join(out_dir, name + "_model.bin")
    debug_path = os.path.join(out_dir, name + "_debug.bin")
    rec = dict(ref.generate(model, model_path, debug_path, B=B, T=T, seed=seed, steps=10, version=6))
    line = "fixture %-26s %-10s %s B=%d T=%d loss %.6f -> %.6f (%.2fs)" % (
        name, scheme, config.describe(), B, T, float(rec["loss"][0]), float(rec["step_losses"][-1]), time.time() - t0)
    return name, scheme, model_path, debug_path, line


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--out", default="dev/fixtures", help="output folder (relative to the current directory)")
    ap.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 8), help="processes (default: CPUs, at most 8)")
    args = ap.parse_args()
    if args.jobs < 1:
        ap.error("--jobs %d: expected at least 1" % args.jobs)
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    t_start = time.time()
    manifest = []
    jobs = [(index, out_dir) for index in range(len(fixtures()))]
    # spawn, not fork: a forked child of a process whose torch thread pool has started can hang
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for name, scheme, model_path, debug_path, line in pool.imap(make_one, jobs):
            manifest.append((name, scheme, model_path, debug_path))
            if name == "standard_tiny":
                v3_index, v3_debug_path = len(manifest) - 1, debug_path  # the v3 file below has the same weights
            print(line, flush=True)
    v3_seed = 1000 + v3_index

    # llm.c's version 3 file of standard_tiny: rebuilt from the same seed (generate() trained the
    # first one), so the same weights and the same debug state
    model = ref.build_model(ref.Config(scheme=ref.STANDARD, **TINY), seed=v3_seed, test_init=True)
    model_path = os.path.join(out_dir, "standard_tiny_v3_model.bin")
    ref.save_checkpoint(model, model_path, version=3)
    manifest.append(("standard_tiny_v3", "standard", model_path, v3_debug_path))
    print("fixture %-26s %-10s llm.c version 3 header, same weights and debug state as standard_tiny" %
          ("standard_tiny_v3", "standard"))

    def rel(p):
        return os.path.relpath(p, REPO)

    tmp = os.path.join(out_dir, "manifest.tsv.tmp")
    with open(tmp, "w") as f:
        for name, scheme, model_path, debug_path in manifest:
            f.write("%s\t%s\t%s\t%s\n" % (name, scheme, rel(model_path), rel(debug_path)))
    os.replace(tmp, os.path.join(out_dir, "manifest.tsv"))

    tmp = os.path.join(out_dir, "forbidden.tsv.tmp")
    with open(tmp, "w") as f:
        for row in FORBIDDEN:
            c = ref.Config(scheme=ref.SCHEMES.index(row[0]), num_layers=row[1], channels=row[2], num_heads=row[3],
                           num_kv_heads=row[4], mlp_hidden=row[5], use_bias=row[6], max_seq_len=64,
                           vocab_size=500, padded_vocab_size=512)
            try:  # a row the reference accepts would be a bug in this table
                ref.config_check(c)
                raise SystemExit("make_fixtures.py: forbidden row %s is accepted by config_check" % (row,))
            except ref.ConfigError:
                pass
            f.write("\t".join(str(x) for x in row) + "\n")
    os.replace(tmp, os.path.join(out_dir, "forbidden.tsv"))
    print("wrote %s (%d fixtures) and %s (%d forbidden combinations) in %.1fs" % (
        rel(os.path.join(out_dir, "manifest.tsv")), len(manifest), rel(os.path.join(out_dir, "forbidden.tsv")),
        len(FORBIDDEN), time.time() - t_start))
    print("(%d processes)" % args.jobs)


if __name__ == "__main__":
    main()
