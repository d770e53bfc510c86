#!/usr/bin/env python3
"""Generation speed per scheme: does a smaller KV cache decode faster? Not a test: on a GPU it takes
minutes.

  python3 dev/bench/gen_bench.py [--batches 1,16,64] [--context 1024] [--model "-e d12"]
                                 [--config dev/ablate/shared_projections.txt] [--out build/gen_bench]
                                 [--device gpu|cpu] [--timeout 300]

Seed 004 (Do Transformers Need Three Projections?, Tables 14-15) measured batched generation of its
1.2B models on one A100 (bf16, a 128-token prompt, 128 new tokens): Q-K=V 4.4-5.3% faster decoding
than QKV in every configuration it ran, Q-MQA 11.7-13.2%. This benchmark asks the same of our trainer at d12:
for each run of the config's table (the schemes and head counts of the shared-projections ablation:
standard, kv_shared, qk_shared, qkv_shared, GQA-4, MQA, Q-GQA-4, Q-MQA), a random init of the model
generates `context - 1` greedy tokens after one end-of-text token (the cache's last position is
`context`) for B sequences decoded together (--num_samples B), at each batch size. The weights do not
change the speed; greedy keeps the host's sampling (an argmax per sequence) small and equal for all.

From each run's closing lines (dev/trainer/train_common.h, generate_report):
  forward tok/s: tokens per second of the decode steps alone (the forward passes and the logits'
      copy back): what the scheme changes, the number compared with the paper;
  end-to-end tok/s: new tokens per second of the whole decode, host sampling included;
  kv bytes/token: what the trainer allocated per position of one sequence (bf16 on a GPU), and the
      cache of the run: B sequences x `context` positions.
Results in OUT: a log per run, results.tsv, and table.md (each scheme's forward tok/s against
standard's at the same batch, and whether it is faster at every batch, the paper's direction).
--device cpu runs the CPU trainers (build/train_gpt2_cpu_<scheme>, fp32) instead of ./train_gpt2cu*:
how make test checks this script on a small --model. A run that fails or times out is a row with
its error, never a number; the exit status is then 1.
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "dev", "ablate"))
import ablate  # noqa: E402  (the ablation's run-table reader, binary names and trainer builds)

# what seed 004 measured (Table 15b, savings versus QKV at 1.2B on an A100): the runs of our config
# that are its variants, and its decode throughput gain range in percent
PAPER = {
    "kv_shared": ("Q-K=V", 4.4, 5.3),
    "q_mqa": ("Q-MQA", 11.7, 13.2),
}
BASELINE = "standard"


def die(msg):
    print("gen_bench: error: " + msg, file=sys.stderr)
    sys.exit(1)


def parse_run(text):
    """the numbers of one --generate run's closing lines, or None where a line is missing"""
    gen = re.search(r"^generate: \d+ prompt tokens in [0-9.]+ ms, (\d+) new tokens in ([0-9.]+) ms \(([0-9.]+) tok/s",
                    text, re.M)
    dec = re.search(r"^decode: (\d+) steps of (\d+) tokens?, ([0-9.]+) ms in the forward passes \(([0-9.]+) tok/s\)", text,
                    re.M)
    kv = re.search(r"^kv cache: (\d+) bytes per token allocated \((\d+)-byte elements", text, re.M)
    params = re.search(r"^model: scheme .*?\| (\d+) parameters", text, re.M)
    if not (gen and dec and kv):
        return None
    return {
        "new_tokens": int(gen.group(1)), "decode_ms": float(gen.group(2)), "e2e_tok_s": float(gen.group(3)),
        "steps": int(dec.group(1)), "batch": int(dec.group(2)), "forward_ms": float(dec.group(3)),
        "forward_tok_s": float(dec.group(4)), "kv_bytes_per_token": int(kv.group(1)), "elem_bytes": int(kv.group(2)),
        "params": int(params.group(1)) if params else 0,
    }


def first_error(text):
    for line in text.splitlines():
        if "error" in line.lower():
            return line.strip()[:200]
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1].strip()[:200] if lines else "no output"


def percent(x, base):
    return 100.0 * (x / base - 1.0)


def table(rows, batches, context, header):
    """table.md: one row per config, per batch forward tok/s (+% vs standard), then the cache"""
    by = {(r["name"], r["batch"]): r for r in rows}
    names = []
    for r in rows:
        if r["name"] not in names:
            names.append(r["name"])
    out = [header, ""]
    cols = ["run", "scheme", "kv bytes/token"] + ["B=%d forward tok/s (vs standard)" % b for b in batches] + \
           ["B=%d end-to-end tok/s" % b for b in batches] + ["cache at B=%d (MiB)" % batches[-1],
                                                             "faster than standard at every B", "paper (1.2B, A100)"]
    out.append("| " + " | ".join(cols) + " |")
    out.append("|" + "---|" * len(cols))
    verdicts = {}
    for name in names:
        first = next(r for r in rows if r["name"] == name)
        cells = [name, first["scheme"]]
        kvb = next((by[(name, b)]["kv_bytes_per_token"] for b in batches if by.get((name, b), {}).get("ok")), None)
        cells.append(str(kvb) if kvb is not None else "-")
        faster = []
        for b in batches:
            r, base = by.get((name, b)), by.get((BASELINE, b))
            if r is None or not r["ok"]:
                cells.append("failed: " + (r["error"] if r else "not run"))
                faster.append(None)
                continue
            rel = ""
            if name != BASELINE and base is not None and base["ok"]:
                p = percent(r["forward_tok_s"], base["forward_tok_s"])
                rel = " (%+.1f%%)" % p
                faster.append(p > 0)
            cells.append("%.0f%s" % (r["forward_tok_s"], rel))
        for b in batches:
            r = by.get((name, b))
            cells.append("%.0f" % r["e2e_tok_s"] if r is not None and r["ok"] else "-")
        big = by.get((name, batches[-1]))
        cells.append("%.3g" % (big["kv_bytes_per_token"] * big["batch"] * context / 1048576.0)
                     if big is not None and big["ok"] else "-")
        if name == BASELINE:
            verdict = "(baseline)"
        elif any(f is None for f in faster) or not faster:
            verdict = "incomplete"
        else:
            verdict = "yes" if all(faster) else "no (%d of %d)" % (sum(faster), len(faster))
        verdicts[name] = verdict
        cells.append(verdict)
        paper = PAPER.get(name)
        cells.append("%s: +%.1f to +%.1f%% decode throughput" % paper if paper else "")
        out.append("| " + " | ".join(cells) + " |")
    # beside the paper: our range of forward-speed gains over the batches against its range
    out.append("")
    for name, (label, lo, hi) in PAPER.items():
        gains = [percent(by[(name, b)]["forward_tok_s"], by[(BASELINE, b)]["forward_tok_s"]) for b in batches
                 if by.get((name, b), {}).get("ok") and by.get((BASELINE, b), {}).get("ok")]
        if len(gains) < len(batches):
            out.append("- %s (`%s`): not measured at every batch; the paper: +%.1f to +%.1f%%." % (label, name, lo, hi))
            continue
        same = "the paper's direction" if all(g > 0 for g in gains) else "not the paper's direction"
        out.append("- %s (`%s`): %+.1f to %+.1f%% decode speed against standard over B = %s (%s); the paper: +%.1f to "
                   "+%.1f%% at 1.2B on an A100." % (label, name, min(gains), max(gains), ", ".join(map(str, batches)), same,
                                                  lo, hi))
    return "\n".join(out) + "\n", verdicts


def main():
    ap = argparse.ArgumentParser(description="generation speed per scheme (tokens/s and KV-cache bytes)")
    ap.add_argument("--batches", default="1,16,64", help="sequences decoded together, comma-separated (default 1,16,64)")
    ap.add_argument("--context", type=int, default=1024, help="positions per sequence: one prompt token, context - 1 new")
    ap.add_argument("--model", default="-e d12", help="the trainer's model flags (default '-e d12', a random init)")
    ap.add_argument("--config", default="dev/ablate/shared_projections.txt", help="the run table: name, scheme, flags")
    ap.add_argument("--runs", default="", help="only these runs of the table, comma-separated (standard always)")
    ap.add_argument("--out", default="build/gen_bench", help="logs, results.tsv and table.md")
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run before it is stopped")
    ap.add_argument("--no-build", action="store_true", help="use the trainers as they are (default: make builds each "
                    "scheme's, as make ablate does; ABLATE_CUDA_ARCHS picks the GPU architectures)")
    a = ap.parse_args()
    os.chdir(ROOT)
    try:
        batches = [int(b) for b in a.batches.split(",") if b.strip()]
    except ValueError:
        die("--batches %s: expected comma-separated integers, e.g. 1,16,64" % a.batches)
    if not batches or any(b < 1 or b > 1024 for b in batches):
        die("--batches %s: expected integers in 1..1024 (--num_samples' range)" % a.batches)
    if a.context < 2:
        die("--context %d: expected at least 2 (one prompt token and one new token)" % a.context)
    if not os.path.isfile(a.config):
        die("--config %s: no such file (HINT: dev/ablate/shared_projections.txt)" % a.config)
    schemes = subprocess.run(["make", "-s", "--no-print-directory", "schemes"], capture_output=True, text=True).stdout.split()
    cfg = ablate.Config(os.path.abspath(a.config), a.config, schemes)
    if cfg.errors:
        line, msg = cfg.errors[0]
        die("%s:%d: %s" % (a.config, line, msg))
    names = cfg.runs
    if a.runs:
        wanted = [r for r in a.runs.split(",") if r]
        unknown = [r for r in wanted if r not in names]
        if unknown:
            die("--runs: no run '%s' in %s (runs: %s)" % (unknown[0], a.config, " ".join(names)))
        names = [n for n in names if n == BASELINE or n in wanted]
    if BASELINE not in names:
        die("%s has no run named '%s': the table compares every run with it" % (a.config, BASELINE))
    if a.device == "gpu" and subprocess.run(["sh", "-c", "nvidia-smi -L 2>/dev/null | grep -q '^GPU'"]).returncode != 0:
        die("no CUDA device on this machine (nvidia-smi -L lists no GPU) (HINT: --device cpu runs the CPU trainers)")
    os.makedirs(a.out, exist_ok=True)
    used = []
    for n in names:
        if cfg.scheme[n] not in used:
            used.append(cfg.scheme[n])
    if not a.no_build:
        ablate.build_trainers(a.device, used, a.out, True)

    rows = []
    started = time.time()
    for name in names:
        scheme, flags = cfg.scheme[name], [w for pair in cfg.flags[name] for w in pair]
        for b in batches:
            cmd = [ablate.binary_of(a.device, scheme)] + a.model.split() + flags + \
                  ["--generate", str(a.context - 1), "--num_samples", str(b), "--temperature", "0"]
            log = os.path.join(a.out, "%s_b%d.log" % (name, b))
            t0 = time.time()
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
                text, rc = p.stdout + p.stderr, p.returncode
            except subprocess.TimeoutExpired as e:
                text = (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
                text += "\nerror: stopped after %.0f s (--timeout)\n" % a.timeout
                rc = 124
            with open(log, "w") as f:
                f.write("$ " + " ".join(cmd) + "\n" + text)
            r = parse_run(text) if rc == 0 else None
            row = {"name": name, "scheme": scheme, "flags": " ".join(flags), "batch": b, "ok": r is not None,
                   "error": "" if r is not None else "exit %d: %s" % (rc, first_error(text)), "wall_s": time.time() - t0}
            if r is not None:
                row.update(r)
                if r["batch"] != b or r["new_tokens"] != (a.context - 1) * b:
                    row["ok"], row["error"] = False, "the run decoded %d x %d tokens, expected %d x %d" % (
                        r["batch"], r["new_tokens"] // max(1, r["batch"]), b, a.context - 1)
            rows.append(row)
            if row["ok"]:
                print("gen_bench: %-10s %-10s B=%-4d forward %9.0f tok/s | end-to-end %9.0f tok/s | kv %d bytes/token "
                      "| %.1f s" % (name, scheme, b, row["forward_tok_s"], row["e2e_tok_s"], row["kv_bytes_per_token"],
                                    row["wall_s"]), flush=True)
            else:
                print("gen_bench: %-10s %-10s B=%-4d FAILED: %s (log %s)" % (name, scheme, b, row["error"], log), flush=True)

    cols = ["run", "scheme", "flags", "batch", "ok", "new_tokens", "steps", "forward_ms", "forward_tok_s", "decode_ms",
            "e2e_tok_s", "kv_bytes_per_token", "elem_bytes", "params", "error"]
    with open(os.path.join(a.out, "results.tsv"), "w") as f:
        f.write("\t".join(cols) + "\n")
        for r in rows:
            vals = [r["name"], r["scheme"], r["flags"], str(r["batch"]), "1" if r["ok"] else "0"]
            vals += [str(r.get(c, "")) for c in cols[5:-1]] + [r["error"]]
            f.write("\t".join(vals) + "\n")
    where = "a GPU" if a.device == "gpu" else "the CPU (fp32 trainers)"
    header = ("Generation speed on %s: `%s`, one end-of-text token then %d greedy tokens per sequence (context %d), "
              "B sequences decoded together (`--num_samples B`); forward tok/s = the decode steps alone, end-to-end = "
              "with the host's sampling. %s, %.0f s." % (where, a.model, a.context - 1, a.context,
                                                       time.strftime("%Y-%m-%d"), time.time() - started))
    md, verdicts = table(rows, batches, a.context, header)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(md)
    print(md, end="")
    failed = sum(1 for r in rows if not r["ok"])
    print("gen_bench: %d runs, %d failed; faster than standard at every batch: %s; results in %s/results.tsv, table.md" % (
        len(rows), failed, ", ".join("%s %s" % (n, v) for n, v in verdicts.items() if n != BASELINE), a.out))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
