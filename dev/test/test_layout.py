#!/usr/bin/env python3
"""test_layout.py: the code keeps the shape a reader relies on (suite `layout` of `make test`).

  python3 dev/test/test_layout.py    one PASS/FAIL line per check; exits 1 on any FAIL

Checks:
- train_gpt2.cu: every kernel (__global__) is launched, and only in the lines just after it: its
  launcher follows it within MAX_LAUNCH_DISTANCE lines (llm.c's habit: an op's kernels, then its
  launcher). A kernel moved away from its launcher, or launched from elsewhere, fails here.
- Neither trainer asks which scheme it is: no scheme constant (QKV_STANDARD ... QKV_Q_RESIDUAL) and no
  `scheme ==` / `scheme !=` in train_gpt2.cu or dev/cpu/train_gpt2_cpu.cpp. They read the layout
  (QKVLayout, qkv_role_view, qkv_has_residual_query in attention_variants.cuh) instead.
- One role view: no other (pointer, stride) view type or role-lookup function than attention_variants.cuh's
  QKVView / qkv_role_view (the names the old ones had are gone from every source).
- attention_variants.cuh holds the schemes only: under 500 lines.
- A trainer one can read in a sitting: train_gpt2.cu at most 3,800 lines, every header of dev/trainer/
  at most 1,200, the README at most 450.
- The training loop is written once (dev/trainer/train_loop.h): neither trainer decides a step's update
  (step_guard_decide), installs the stop signals or walks the steps itself.
- One kernel-lab header: dev/cuda/ has exactly one .h, common.h.
- The top level is exactly the design's file list.
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MAX_LAUNCH_DISTANCE = 60  # lines from a kernel's closing brace to the last line launching it
SCHEME_CONSTANTS = re.compile(r"\bQKV_(STANDARD|Q_IDENTITY|K_IDENTITY|V_IDENTITY|KV_SHARED|QK_SHARED|QKV_SHARED|Q_RESIDUAL)\b")
SCHEME_TEST = re.compile(r"\bscheme\s*[!=]=|[!=]=\s*kQKVScheme\b|\bkQKVScheme\s*[!=]=")
OLD_VIEWS = ["RowView", "TiledRows", "AttnGradRows", "attn_role_rows", "lab_role_rows_host", "attn_role("]
TOP_LEVEL = {".ci", ".gitignore", "LICENSE", "Makefile", "README.md", "attention_variants.cuh", "dataloader.h",
             "dev", "test_gpt2.cu", "tokenizer.h", "train_gpt2.cu"}

failed = 0


def check(ok, what):
    global failed
    failed |= not ok
    print("%s layout %s" % ("PASS" if ok else "FAIL", what))


def read(path):
    return open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")


def code_only(line):
    """the line without its // comment (string literals with // are rare enough to ignore here)"""
    return line.split("//", 1)[0]


def kernels(lines):
    """(name, first line, last line) of every __global__ function, 1-based, by brace matching"""
    out, i = [], 0
    while i < len(lines):
        if "__global__" in code_only(lines[i]):
            j, head = i, ""
            while "{" not in head:
                head += code_only(lines[j]) + " "
                j += 1
            name = [n for n in re.findall(r"(\w+)\s*\(", head) if n not in ("__launch_bounds__", "alignas")][0]
            depth, k, started = 0, i, False
            while True:
                for ch in code_only(lines[k]):
                    if ch == "{":
                        depth, started = depth + 1, True
                    elif ch == "}":
                        depth -= 1
                if started and depth == 0:
                    break
                k += 1
            out.append((name, i + 1, k + 1))
            i = k + 1
        else:
            i += 1
    return out


# --- kernels beside their launchers: in the trainer and in its CUDA headers ----------------------
TRAINER_CUDA = ["train_gpt2.cu"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "dev", "trainer", "*.cuh")))
for path in TRAINER_CUDA:
    trainer = read(path)
    found = kernels(trainer)
    if path == "train_gpt2.cu":
        check(len(found) > 0, "%s: %d kernels found" % (path, len(found)))
    for name, first, last in found:
        launch = re.compile(r"\b%s\s*(<[^<>]*>)?\s*<<<" % re.escape(name))
        at = [n + 1 for n, l in enumerate(trainer) if launch.search(code_only(l))]
        near = [n for n in at if last < n <= last + MAX_LAUNCH_DISTANCE]
        check(len(at) > 0 and near == at,
              "%s %s (lines %d-%d): launched at line %s, %s" %
              (path, name, first, last, ", ".join(map(str, at)) or "nowhere",
               "within %d lines after it" % MAX_LAUNCH_DISTANCE if at and near == at else
               "expected every launch within %d lines after the kernel (its launcher follows it)" % MAX_LAUNCH_DISTANCE))

# --- the trainers read the layout, not the scheme --------------------------------------------------
for path in TRAINER_CUDA + ["dev/cpu/train_gpt2_cpu.cpp"]:
    hits = ["%d: %s" % (n + 1, l.strip()) for n, l in enumerate(read(path))
            if SCHEME_CONSTANTS.search(code_only(l)) or SCHEME_TEST.search(code_only(l))]
    check(not hits, "%s tests no scheme (no QKV_<SCHEME> constant, no `scheme ==`)%s" %
          (path, "" if not hits else ": " + "; ".join(hits[:3])))

# --- one role view ----------------------------------------------------------------------------------
sources = subprocess.run(["git", "ls-files", "*.cu", "*.cuh", "*.h", "*.cpp"], cwd=ROOT, capture_output=True,
                         text=True).stdout.split()
sources = [s for s in sources if s != "dev/test/test_layout.py" and os.path.exists(os.path.join(ROOT, s))]
old = []
for path in sources:
    for n, l in enumerate(read(path)):
        for name in OLD_VIEWS:
            if re.search(r"\b" + re.escape(name), l):
                old.append("%s:%d %s" % (path, n + 1, name))
view_defs = [s for s in sources if any(re.search(r"\bstruct\s+QKVView\b", l) for l in read(s))]
check(not old and view_defs == ["attention_variants.cuh"],
      "one role view: QKVView defined in %s; %s" % (", ".join(view_defs) or "nowhere",
      "no other view type or lookup" if not old else "still there: " + ", ".join(old[:4])))

# --- attention_variants.cuh is about schemes -----------------------------------------------------
n = len(read("attention_variants.cuh"))
check(n < 500, "attention_variants.cuh: %d lines (expected under 500: the schemes only)" % n)

# --- sizes a reader can take in ------------------------------------------------------------------
n = len(read("train_gpt2.cu")) - 1
check(n <= 3800, "train_gpt2.cu: %d lines (expected at most 3,800: the infrastructure lives in dev/trainer/)" % n)
big = ["%s %d" % (os.path.relpath(p, ROOT), len(read(os.path.relpath(p, ROOT))) - 1)
       for p in sorted(glob.glob(os.path.join(ROOT, "dev", "trainer", "*")))]
over = [b for b in big if int(b.split()[-1]) > 1200]
check(not over, "dev/trainer/: %d headers, the largest %s lines (expected none over 1,200)%s" %
      (len(big), max(big, key=lambda b: int(b.split()[-1])), "" if not over else ": " + ", ".join(over)))
n = len(read("README.md")) - 1
check(n <= 450, "README.md: %d lines (expected at most 450: the details live in dev/*.md)" % n)

# --- the training loop, once ------------------------------------------------------------------------
LOOP_ONLY = re.compile(r"(step_guard_decide|train_signals_install|step_guard_finish)\s*\(")
for path in ["train_gpt2.cu", "dev/cpu/train_gpt2_cpu.cpp"]:
    hits = ["%d" % (n + 1) for n, l in enumerate(read(path)) if LOOP_ONLY.search(code_only(l))]
    check(not hits, "%s runs no training loop of its own (step_guard_decide, train_signals_install and "
          "step_guard_finish are dev/trainer/train_loop.h's)%s" % (path, "" if not hits else ": lines " + ", ".join(hits)))

# --- two lab headers: the labs' shared helpers, and the flash versions the trainer does not hold
# (both attention labs run them, and they share version 2's tile helpers) ----------------------------
headers = sorted(f for f in os.listdir(os.path.join(ROOT, "dev", "cuda")) if f.endswith(".h"))
check(headers == ["attention_flash_versions.h", "common.h"], "dev/cuda headers: %s (expected "
      "attention_flash_versions.h and common.h)" % (" ".join(headers) or "none"))

# --- the top level ----------------------------------------------------------------------------------
tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split("\n")
top = {p.split("/")[0] for p in tracked if p}
check(top == TOP_LEVEL, "top level: %s%s" % (" ".join(sorted(top)), "" if top == TOP_LEVEL else
      " (expected " + " ".join(sorted(TOP_LEVEL)) + ")"))

sys.exit(1 if failed else 0)
