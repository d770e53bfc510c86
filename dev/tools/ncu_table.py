"""
ncu_table.py: the top kernels of one training step, from Nsight Compute's CSV, against the cost
model of `build/params profile` (dev/trainer/profile.h). dev/test/gpu_suite.sh (stage profile_ncu) runs it
on `ncu --profile-from-start off` over one step of the standard scheme at d12, T 1024, B 64, BF16.

  python3 dev/tools/ncu_table.py NCU_CSV [--predicted PROFILE_CSV] [--source train_gpt2.cu]
                                 [--top 15] [--format text|markdown|tsv]

NCU_CSV      `ncu --csv [--page details] [--print-units base] --metrics ...`: the long format, one
             row per (kernel launch, metric) with the columns "ID", ..., "Kernel Name", ...,
             "Metric Name", "Metric Unit", "Metric Value" (quoted; values may carry thousands
             separators; ==PROF== and program lines around it are skipped). `--page raw`'s wide
             format (one row per launch, a column per metric, a units row under the header) is read
             too. Metrics used (missing ones print as "-"):
               gpu__time_duration.sum                              duration
               launch__registers_per_thread                        registers
               launch__shared_mem_per_block_static + _dynamic      shared memory per block
               sm__warps_active.avg.pct_of_peak_sustained_active   achieved occupancy
               sm__throughput.avg.pct_of_peak_sustained_elapsed    SM throughput, % of peak
               dram__throughput.avg.pct_of_peak_sustained_elapsed  DRAM throughput, % of peak
PROFILE_CSV  `build/params profile d12 1024 64 --csv FILE` (columns row, ..., predicted_ms; a
             trainer's --profile_csv has them too): the predicted time of each row
--source     the trainer's source: its __global__ functions are "ours"; every other kernel is a
             library's (cuBLASLt)

Kernels are grouped by function name (template arguments and parameters dropped). Columns: calls,
total ms, % of the step (the sum of all kernel durations of the capture: no launch gaps, no
memsets), registers and shared memory per block (min-max over launches), achieved occupancy, SM and
DRAM throughput (duration-weighted means), predicted ms and measured / predicted.

Predictions (the one place that maps kernels to profile rows: GROUPS below). A profile row is a
sublayer, a kernel a piece of one or several; a group is the kernels that together do a set of rows:
  - a group of one kernel: that kernel is predicted the sum of its rows' predicted_ms;
  - a group of several kernels (encoder_bwd, grad_norm, and "matmuls": cuBLASLt's GEMMs, which run
    every matmul row under a few kernel names, plus the classifier's own kernels inside the
    classifier row, and the bias gradients' bias_sums_add_kernel (after the BGRADB epilogue) or
    bias_backward_kernel (--bias_fusion 0) inside the backward matmul rows): no per-kernel prediction ("-"); the group is compared as a whole in the
    second table;
  - kernels in no group (the unfused attention, fallbacks, sampling: not on the standard scheme's
    fused BF16 path) have no prediction, and are listed as such.
Rows without a kernel in the capture (zero_grad: cudaMemsetAsync, which ncu does not profile) are
listed too. Python 3.9+, standard library only.
"""
import argparse
import csv
import os
import re
import sys

METRIC_TIME = "gpu__time_duration.sum"
METRIC_REGS = "launch__registers_per_thread"
METRIC_SMEM = ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic")
METRIC_OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
METRIC_SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
METRIC_DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
LIBRARY = "<library>"  # any kernel not defined in --source

# group, kernels (regular expressions on the function name, or LIBRARY), profile rows it does
GROUPS = [
    ("encoder_fwd", [r"encoder_forward_kernel"], ["encoder_fwd"]),
    ("layernorm_fwd", [r"residual_layernorm_forward_kernel"], ["ln1_fwd", "ln2_fwd", "lnf_fwd"]),
    ("layernorm_bwd", [r"norm_backward_kernel"], ["ln1_bwd", "ln2_bwd", "lnf_bwd"]),
    ("attn_fwd", [r"flash3?_attention_forward_kernel"], ["attn_fwd"]),
    ("attn_bwd", [r"flash3_attention_backward_kernel", r"flash3_dq_store_kernel"], ["attn_bwd"]),
    ("attn_bwd_delta", [r"flash_attention_delta_kernel"], ["attn_bwd_delta"]),
    ("attn_bwd_dkdv", [r"flash_attention_backward_dkdv_kernel"], ["attn_bwd_dkdv"]),
    ("attn_bwd_dq", [r"flash_attention_backward_dq_kernel"], ["attn_bwd_dq"]),
    ("encoder_bwd", [r"encoder_backward_wte_kernel", r"encoder_backward_wte_reduce_kernel",
                     r"encoder_backward_wpe_kernel"], ["encoder_bwd"]),
    ("grad_norm", [r"sum_squares_partial_kernel", r"sum_partials_kernel"], ["grad_norm"]),
    ("adamw", [r"adamw_kernel"], ["adamw"]),
    ("matmuls", [LIBRARY, r"fused_classifier_onepass_kernel", r"fused_classifier_kernel", r"loss_sum_kernel",
                 r"bias_backward_kernel", r"bias_sums_add_kernel"],
     ["qkv_fwd", "qres_fwd", "attproj_fwd", "fc_fwd", "fcproj_fwd", "classifier", "fcproj_bwd", "fc_bwd",
      "attproj_bwd", "qkv_bwd", "qres_bwd"]),
]

TIME_UNITS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
              "second": 1e3, "s": 1e3}
BYTE_UNITS = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kibyte": 1024.0, "mibyte": 1048576.0,
              "kib": 1024.0, "mib": 1048576.0}


def die(msg):
    print("ncu_table: " + msg, file=sys.stderr)
    sys.exit(1)


def number(text):
    t = (text or "").strip().replace(",", "")
    try:
        return float(t)
    except ValueError:
        return None


def scaled(value, unit, table):
    """value in unit -> the table's base (ms or bytes); unknown units are taken as the base."""
    if value is None:
        return None
    u = (unit or "").strip().lower().split("/")[0]
    return value * table.get(u, 1.0)


def function_name(kernel):
    """'void flash_attention_forward_kernel<64, 1>(__nv_bfloat16 *, ...)' -> 'flash_attention_forward_kernel'"""
    k = kernel.strip()
    if k.startswith("void "):
        k = k[5:]
    return re.split(r"[<(]", k, maxsplit=1)[0].strip() or kernel.strip()


def read_ncu(path):
    """-> {launch id: {"kernel": name, metric: (value, unit)}} in launch order."""
    with open(path, newline="", errors="replace") as f:
        lines = [ln for ln in f if ln.startswith('"')]  # CSV lines are quoted; ==PROF== and program output are not
    rows = list(csv.reader(lines))
    header_at = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "ID" in r), None)
    if header_at is None:
        die("%s: no CSV header with \"ID\" and \"Kernel Name\" (expected ncu --csv output)" % path)
    header = rows[header_at]
    col = {name: i for i, name in enumerate(header)}
    launches = {}
    if "Metric Name" in col and "Metric Value" in col:  # long format
        for r in rows[header_at + 1:]:
            if len(r) < len(header) or r == header:
                continue
            lid = r[col["ID"]]
            entry = launches.setdefault(lid, {"kernel": r[col["Kernel Name"]]})
            unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
            entry[r[col["Metric Name"]]] = (number(r[col["Metric Value"]]), unit)
    else:  # wide format: a units row (empty ID) under the header
        units = {}
        body = rows[header_at + 1:]
        if body and body[0][col["ID"]].strip() == "":
            units = {name: body[0][i] for name, i in col.items() if i < len(body[0])}
            body = body[1:]
        for r in body:
            if len(r) < len(header) or r == header:
                continue
            entry = launches.setdefault(r[col["ID"]], {"kernel": r[col["Kernel Name"]]})
            for name, i in col.items():
                if "__" in name:
                    entry[name] = (number(r[i]), units.get(name, ""))
    if not launches:
        die("%s: a header but no kernel rows (did ncu profile anything? --profile-from-start off needs the "
            "program's cudaProfilerStart)" % path)
    return launches


def read_predicted(path):
    """-> {row: predicted ms} from a CSV with columns row and predicted_ms."""
    with open(path, newline="") as f:
        rd = csv.DictReader(f)
        if rd.fieldnames is None or "row" not in rd.fieldnames or "predicted_ms" not in rd.fieldnames:
            die("%s: expected a CSV with columns row and predicted_ms (build/params profile ... --csv FILE), got %s"
                % (path, rd.fieldnames))
        return {r["row"]: number(r["predicted_ms"]) for r in rd if r["row"] != "total"}


def our_kernels(path):
    """The __global__ function names of a CUDA source."""
    with open(path, errors="replace") as f:
        text = f.read()
    names = re.findall(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(", text)
    return set(names)


def group_of(name, ours):
    for g, pats, rows in GROUPS:
        for p in pats:
            if p == LIBRARY:
                if ours is not None and name not in ours:
                    return g
            elif re.fullmatch(p, name):
                return g
    return None


def aggregate(launches):
    kernels = {}
    for entry in launches.values():
        name = function_name(entry["kernel"])
        k = kernels.setdefault(name, {"name": name, "calls": 0, "ms": 0.0, "timed": 0.0, "regs": [], "smem": [],
                                      "occ": 0.0, "sm": 0.0, "dram": 0.0, "w_occ": 0.0, "w_sm": 0.0, "w_dram": 0.0})
        k["calls"] += 1
        t = scaled(*entry.get(METRIC_TIME, (None, "")), TIME_UNITS)
        if t is not None:
            k["ms"] += t
        w = t if t is not None else 0.0
        regs = entry.get(METRIC_REGS, (None, ""))[0]
        if regs is not None:
            k["regs"].append(regs)
        parts = [scaled(*entry[m], BYTE_UNITS) for m in METRIC_SMEM if m in entry]
        if parts and all(p is not None for p in parts):
            k["smem"].append(sum(parts))
        for key, metric in (("occ", METRIC_OCC), ("sm", METRIC_SM), ("dram", METRIC_DRAM)):
            v = entry.get(metric, (None, ""))[0]
            if v is not None:
                k[key] += v * w
                k["w_" + key] += w
    return kernels


def span(values, fmt):
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return fmt(lo) if lo == hi else "%s-%s" % (fmt(lo), fmt(hi))


def smem_text(b):
    return "%d" % b if b < 1024 else "%.1fk" % (b / 1024.0)


def main():
    ap = argparse.ArgumentParser(description="top kernels of an ncu CSV, against build/params profile")
    ap.add_argument("ncu_csv")
    ap.add_argument("--predicted", help="build/params profile ... --csv FILE (columns row, predicted_ms)")
    ap.add_argument("--source", help="the trainer's source (default: train_gpt2.cu if present)")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--format", choices=("text", "markdown", "tsv"), default="text")
    args = ap.parse_args()
    launches = read_ncu(args.ncu_csv)
    source = args.source
    if source is None:
        source = "train_gpt2.cu" if os.path.isfile("train_gpt2.cu") else None
    ours = our_kernels(source) if source else None
    predicted = read_predicted(args.predicted) if args.predicted else {}
    kernels = aggregate(launches)
    total = sum(k["ms"] for k in kernels.values())
    groups = {}
    for k in kernels.values():
        k["group"] = group_of(k["name"], ours)
        if k["group"]:
            groups.setdefault(k["group"], []).append(k)
    rows_of = {g: rows for g, _, rows in GROUPS}

    def group_pred(g):
        vals = [predicted[r] for r in rows_of[g] if predicted.get(r) is not None]
        return sum(vals) if vals else None

    for k in kernels.values():
        g = k["group"]
        k["pred"] = group_pred(g) if g and len(groups[g]) == 1 and predicted else None

    top = sorted(kernels.values(), key=lambda k: -k["ms"])[:args.top]
    cols = ["#", "kernel", "calls", "total_ms", "%step", "regs", "smem_B", "occ%", "SM%", "DRAM%", "pred_ms", "x_pred"]
    table = []
    for i, k in enumerate(top, 1):
        def mean(key):
            return "%.1f" % (k[key] / k["w_" + key]) if k["w_" + key] > 0 else "-"
        table.append([str(i), k["name"], str(k["calls"]), "%.3f" % k["ms"],
                      "%.1f" % (100.0 * k["ms"] / total) if total > 0 else "-",
                      span(k["regs"], lambda v: "%d" % v), span(k["smem"], smem_text),
                      mean("occ"), mean("sm"), mean("dram"),
                      "%.3f" % k["pred"] if k["pred"] else "-",
                      "%.2f" % (k["ms"] / k["pred"]) if k["pred"] else "-"])
    gtable = []
    for g, pats, rows in GROUPS:
        ks = groups.get(g, [])
        p = group_pred(g) if predicted else None
        present = [r for r in rows if r in predicted]
        if not ks and not present:
            continue
        ms = sum(k["ms"] for k in ks)
        gtable.append([g, str(len(ks)), "%.3f" % ms, "%.3f" % p if p else "-", "%.2f" % (ms / p) if p and ks else "-",
                       "+".join(present) if predicted else "+".join(rows)])
    covered = {r for g, _, rows in GROUPS if groups.get(g) for r in rows}
    no_kernel = [r for r, v in predicted.items() if v and r not in covered]
    unmapped = sorted((k for k in kernels.values() if not k["group"]), key=lambda k: -k["ms"])

    if args.format == "tsv":
        print("\t".join(cols))
        for r in table:
            print("\t".join(r))
        print("\t".join(["group", "kernels", "total_ms", "pred_ms", "x_pred", "rows"]))
        for r in gtable:
            print("\t".join(r))
        return 0
    n_launch = len(launches)
    print("ncu: %d kernel launches, %d kernels, %.3f ms of kernel time in the capture (the step's kernels, "
          "back to back: no launch gaps, no memsets)" % (n_launch, len(kernels), total))
    if predicted:
        print("predicted (%s): %.3f ms over the profile rows" % (args.predicted, sum(v for v in predicted.values() if v)))
    md = args.format == "markdown"

    def emit(header, body, widths):
        if md:
            print("| " + " | ".join(header) + " |")
            print("|" + "|".join("---" for _ in header) + "|")
            for r in body:
                print("| " + " | ".join(r) + " |")
        else:
            fmt = "  ".join("%%-%ds" % w if i == 1 or (i == 0 and header[0] == "group") else "%%%ds" % w
                            for i, w in enumerate(widths))
            print(fmt % tuple(header))
            for r in body:
                print(fmt % tuple(c[:widths[i]] if i == 1 else c for i, c in enumerate(r)))

    print()
    print("top %d kernels by total time" % len(table))
    emit(cols, table, [2, 48, 5, 9, 5, 7, 11, 5, 5, 5, 8, 6])
    if gtable:
        print()
        print("groups (kernels -> profile rows), measured vs predicted")
        emit(["group", "kernels", "total_ms", "pred_ms", "x_pred", "rows"], gtable, [14, 7, 9, 8, 6, 0])
    if unmapped:
        print()
        print("no prediction (in no group: not on the standard scheme's fused BF16 path, or new): " +
              ", ".join("%s (%.3f ms)" % (k["name"], k["ms"]) for k in unmapped))
    multi = sorted(g for g, ks in groups.items() if len(ks) > 1)
    if multi:
        print("no per-kernel prediction (several kernels share the group's rows): " +
              "; ".join("%s: %s" % (g, ", ".join(sorted(k["name"] for k in groups[g]))) for g in multi))
    if no_kernel:
        print("predicted rows with no kernel in the capture: " + ", ".join(no_kernel))
    return 0


if __name__ == "__main__":
    sys.exit(main())
