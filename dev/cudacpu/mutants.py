#!/usr/bin/env python3
"""The CPU runtime's self-test: planted bugs that the CPU run of the CUDA trainer must catch.

For each mutant of dev/cudacpu/mutants.txt: train_gpt2.cu (or the file its `file:` line names, a
CUDA header of the trainer or of the kernel labs) with the one edit, through rewrite.py,
test_gpt2.cu built against it with g++ (-Og: these builds are thrown away), run with --fixtures-only
on the mutant's fixtures; or a kernel lab (run: lab_<op> <lab arguments>) built against it and run
with --check and those arguments (or --large alone); or the trainer itself (run: train_<stem> grad_accum), its step of
several micro-steps against the reference's one batch (dev/test/grad_accum_check.py). The mutant is caught when the run fails: a FAIL line, a runtime error
("cuda-cpu: ..."), a crash, or the time limit; the run ends at its first FAIL line. Each distinct run is first made on the unmutated
source (a control, c01 ...), which must pass: otherwise a "caught" would mean nothing. A control runs
the cudacpu suite's own binary of the unmutated source (build/cudacpu/test_gpt2cu_<stem> or
build/cudacpu/lab_<op> or build/cudacpu/train_gpt2cu_<stem>, -O2, made here if missing or stale): the mutants' -Og builds differ from it
by the one edit and the optimization level, which changes no result of a correct program. One line
each:

  PASS mutant m01 (dropped __syncthreads: ...): caught: <the run's first FAIL or error line>
  FAIL mutant m01 (...): the CPU run passed with the bug in place
  FAIL mutant m01 (...): stale: the text to find occurs 0 times in train_gpt2.cu (expected once)

  python3 dev/cudacpu/mutants.py [--jobs N] [--only m01,m05] [--list]
Build trees and logs: build/mutants/<id>/.
"""
import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIST = os.path.join(ROOT, "dev", "cudacpu", "mutants.txt")
LAB_HEADERS = ["attention_flash_versions.h", "common.h", "../cpu/attention_tiled_cpu.h", "../cpu/kernels_cpu.h"]  # as the labs include them
OUT = os.path.join(ROOT, "build", "mutants")
# the trainer's CUDA headers (kernels and launchers outside train_gpt2.cu), rewritten with it
TRAINER_CUDA_HEADERS = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "dev", "trainer", "*.cuh")))
# what a mutant may edit: the trainer and its CUDA headers, or the flash versions the labs hold
MUTABLE_FILES = ["train_gpt2.cu"] + TRAINER_CUDA_HEADERS + ["dev/cuda/attention_flash_versions.h"]
RUN_TIMEOUT_S = 300


def parse(path):
    """mutants.txt -> [dict(id, kind, run_stem, fixtures, find, replace)]"""
    mutants, cur, section = [], None, None
    with open(path) as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if line.startswith("## "):
            m = re.match(r"## (m\d+) (.+)$", line)
            if not m:
                sys.exit("%s:%d: expected '## m<NN> <kind>: <what>'" % (path, n))
            cur = dict(id=m.group(1), kind=m.group(2), run_stem=None, fixtures=None, lab_args=[], env=[], args=None,
                       file="train_gpt2.cu", find=[], replace=[], line=n)
            mutants.append(cur)
            section = None
        elif cur is None or line == "end":
            section = None if line == "end" else section
        elif section is None and line.startswith("run: "):
            parts = line[5:].split()
            if (len(parts) < 1 or (not parts[0].startswith("lab_") and len(parts) != 2) or
                    (parts[0].startswith("train_") and parts[1] != "grad_accum")):
                sys.exit("%s:%d: expected 'run: <binary stem> <fixtures>', 'run: lab_<op> [lab arguments]' or "
                         "'run: train_<binary stem> grad_accum'" % (path, n))
            cur["run_stem"] = parts[0]
            cur["fixtures"] = [] if parts[0].startswith(("lab_", "train_")) else parts[1].split(",")
            cur["lab_args"] = parts[1:] if parts[0].startswith(("lab_", "train_")) else []
        elif section is None and line.startswith("env: "):
            cur["env"] = line[5:].split()
            if not all(re.match(r"^[A-Z_][A-Z0-9_]*=\S*$", e) for e in cur["env"]):
                sys.exit("%s:%d: expected 'env: NAME=value ...'" % (path, n))
        elif section is None and line.startswith("file: "):
            cur["file"] = line[6:].strip()
            if cur["file"] not in MUTABLE_FILES:
                sys.exit("%s:%d: file: is one of %s" % (path, n, ", ".join(MUTABLE_FILES)))
        elif section is None and line.startswith("args: "):
            cur["args"] = line[6:].split()
        elif line in ("find:", "replace:"):
            section = line[:-1]
        elif section is not None:
            cur[section].append(line)
        elif line.strip() and not line.startswith("#"):
            sys.exit("%s:%d: unexpected line outside a find/replace block: %s" % (path, n, line))
    for m in mutants:
        if not m["run_stem"] or not m["find"]:
            sys.exit("%s:%d: mutant %s needs a run: line and a find: block" % (path, m["line"], m["id"]))
    return mutants


def sh(cmd, log, timeout=None):
    with open(log, "w") as f:
        try:
            return subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return None


def run_until_caught(cmd, log, timeout):
    """cmd's output into log, its process group ended at the first FAIL line: a mutant is caught then,
    and the rest of the run (most of a lab's shapes) would tell nothing more -> the exit status
    (negative when ended here), None after timeout seconds"""
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = []

        def end(why):
            if why == "timeout":
                timed_out.append(True)
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass
        timer = threading.Timer(timeout, end, ["timeout"])
        timer.start()
        try:
            for line in p.stdout:
                f.write(line.decode(errors="replace"))
                if line.startswith(b"FAIL "):
                    f.write("(mutants.py: the run ended at its first FAIL)\n")
                    end("caught")
                    break
            p.stdout.close()
            rc = p.wait()
        finally:
            timer.cancel()
    return None if timed_out else rc


# Every build: g++ -Og (thrown away after the run; a third quicker to build than -O1, whose runs were
# 15-50% quicker, but the runs end at their first FAIL: the suite 747 s -> 652 s on 2 cores, 2026-11-30),
# the runtime force-included through a precompiled
# header made once (make_pch: a third of each build's time is parsing cuda_cpu.h). Where g++ finds the
# .gch unusable (a lab's -fopenmp), PCH_HEADER is an ordinary header that includes cuda_cpu.h.
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
BUILD_FLAGS = [os.environ.get("CXX", "g++"), "-std=c++17", "-Og", "-g0", "-fno-strict-aliasing", "-w",
               "-I" + CUDA_HOME + "/include", "-I.", "-Idev/cudacpu"]
PCH_HEADER = os.path.join(OUT, "pch", "cudacpu_pch.h")


def make_pch():
    """PCH_HEADER and its .gch -> None, or why not (the builds then parse the header each time)"""
    os.makedirs(os.path.dirname(PCH_HEADER), exist_ok=True)
    with open(PCH_HEADER, "w") as f:
        f.write('#include "cuda_cpu.h"\n')
    log = os.path.join(OUT, "pch", "build.log")
    if sh(BUILD_FLAGS + ["-x", "c++-header", PCH_HEADER, "-o", PCH_HEADER + ".gch"], log) != 0:
        if os.path.exists(PCH_HEADER + ".gch"):
            os.remove(PCH_HEADER + ".gch")
        return "see " + log
    return None


def build(d, stem, mutated, text):
    """file `mutated` = text, rewritten with the others, and the test binary (or the lab) built in d ->
    (binary, None) or (None, why)"""
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "src"))
    mutant_path = os.path.join(d, os.path.basename(mutated))
    with open(mutant_path, "w") as f:
        f.write(text)
    # the rewritten files keep the original names (rewrite.py's #line), so messages name train_gpt2.cu
    lab, trainer = stem.startswith("lab_"), stem.startswith("train_")
    sources = [(f, os.path.join(ROOT, f)) for f in ["train_gpt2.cu"] + TRAINER_CUDA_HEADERS]
    if trainer:  # the training binary itself: train_gpt2.cu's main
        stem = stem[len("train_"):]
        main_source = os.path.join(d, "src", "train_gpt2.cu")
    elif lab: # dev/cuda/<op>.cu and its headers beside it: their "../../train_gpt2.cu" is the trainer
        op = stem[4:-5] if stem.endswith("_fp32") else stem[4:]
        sources += [(os.path.join("dev", "cuda", f), os.path.join(ROOT, "dev", "cuda", f)) for f in LAB_HEADERS + [op + ".cu"]]
        main_source = os.path.join(d, "src", "dev", "cuda", op + ".cu")
    else:
        sources.append(("test_gpt2.cu", os.path.join(ROOT, "test_gpt2.cu")))
        main_source = os.path.join(d, "src", "test_gpt2.cu")
    sources = [(name, mutant_path if os.path.normpath(name) == os.path.normpath(mutated) else src) for name, src in sources]
    if mutant_path not in [src for _, src in sources]:
        return None, "builds without %s (a mutant of a lab header runs a lab)" % mutated
    for name, src in sources:
        dst = os.path.join(d, "src", name)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if sh([sys.executable, "dev/cudacpu/rewrite.py", src, dst], os.path.join(d, "rewrite.log")) != 0:
            return None, "fails in rewrite.py (see %s)" % os.path.join(d, "rewrite.log")
    scheme = stem[:-5] if stem.endswith("_fp32") else stem
    precision = "-DENABLE_FP32" if stem.endswith("_fp32") else "-DENABLE_BF16"
    binary = os.path.join(d, ("" if lab else "train_gpt2cu_" if trainer else "test_gpt2cu_") + stem)
    cmd = BUILD_FLAGS + ["-x", "c++", "-include", PCH_HEADER, precision]
    cmd += ["-fopenmp"] if lab else ["-DQKV_SCHEME=QKV_" + scheme.upper()]
    cmd += [main_source, "-o", binary]
    if sh(cmd, os.path.join(d, "build.log")) != 0:
        with open(os.path.join(d, "build.log")) as f:
            first = next((l.strip() for l in f if "error" in l), "see build.log")
        return None, "does not compile: %s" % first
    return binary, None


# the controls' binaries: the cudacpu suite's, made once per binary (several controls may run the
# same binary on other fixtures; make is up to date after that suite, so usually nothing is built)
CONTROL_BUILDS, CONTROL_BUILDS_LOCK = {}, threading.Lock()


def control_binary(stem):
    with CONTROL_BUILDS_LOCK:
        entry = CONTROL_BUILDS.setdefault(stem, {"lock": threading.Lock(), "result": None})
    with entry["lock"]:
        if entry["result"] is None:
            target = os.path.join("build", "cudacpu", stem if stem.startswith("lab_") else
                                  "train_gpt2cu_" + stem[len("train_"):] if stem.startswith("train_") else
                                  "test_gpt2cu_" + stem)
            log = os.path.join(OUT, "control_%s_make.log" % stem)
            if sh(["make", "-s", target], log) != 0:
                with open(log, errors="replace") as f:
                    first = next((l.strip() for l in f if "error" in l.lower()), "see " + log)
                entry["result"] = (None, "does not build (make %s): %s" % (target, first))
            else:
                entry["result"] = (os.path.join(ROOT, target), None)
    return entry["result"]


def run_mutant(m, source, manifest_rows):
    """-> (ok, message)"""
    control = m.get("control", False)
    find, replace = "\n".join(m["find"]) + "\n", "\n".join(m["replace"]) + ("\n" if m["replace"] else "")
    count = source[m["file"]].count(find)
    if not control and count != 1:
        return False, "stale: the text to find occurs %d times in %s (expected once)" % (count, m["file"])
    stem = m["run_stem"]
    lab = stem.startswith("lab_")
    d = os.path.join(OUT, m["id"])
    if control:
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        binary, why = control_binary(stem)
        if binary is None:
            return False, "the unmutated source %s" % why
    else:
        binary, why = build(d, stem, m["file"], source[m["file"]].replace(find, replace))
        if binary is None:
            return False, "the mutant %s, so it tests nothing (fix the edit)" % why
    manifest = os.path.join(d, "manifest.tsv")
    with open(manifest, "w") as f:
        for name in m["fixtures"]:
            if name not in manifest_rows:
                return False, "fixture %s not in dev/fixtures/manifest.tsv" % name
            f.write(manifest_rows[name])
    if stem.startswith("train_"):  # the fixtures' tolerances: FP32 1e-4, BF16 2e-2
        run_cmd = [os.environ.get("PYTHON", "/usr/bin/python3"), "dev/test/grad_accum_check.py", binary,
                   "1e-4" if stem.endswith("_fp32") else "2e-2", d, stem]
    elif lab:
        run_cmd = [binary] + ([] if "--large" in m["lab_args"] else ["--check"]) + m["lab_args"]  # --large is a check of its own
    else:
        run_cmd = [binary, manifest] + (m["args"] or ["--fixtures-only"])
    log = os.path.join(d, "run.log")
    if control:
        rc = sh(["env"] + m["env"] + run_cmd, log, timeout=RUN_TIMEOUT_S)
    else: # line-buffered, so that the first FAIL line arrives when it is printed
        rc = run_until_caught(["env", "PYTHONUNBUFFERED=1"] + m["env"] + ["stdbuf", "-oL", "-eL"] + run_cmd, log,
                              RUN_TIMEOUT_S)
    with open(log, errors="replace") as f:
        text = f.read()
    evidence = re.search(r"^(FAIL .*|cuda-cpu: .*|error: .*)$", text, re.M)
    if control: # the same build and run without the bug must pass, or a "caught" means nothing
        if rc == 0:
            return True, "the unmutated source passes this run"
        return False, "the unmutated source fails this run, so no mutant on it proves anything: " + (
            evidence.group(1)[:300] if evidence else "exit status %s (see %s)" % (rc, log))
    if rc is None:
        return True, "caught: the run did not finish in %d s (a hang)" % RUN_TIMEOUT_S
    if rc != 0:
        return True, "caught: " + (evidence.group(1)[:300] if evidence else "exit status %d" % rc)
    return False, "the CPU run passed with the bug in place (see %s)" % log


def main():
    ap = argparse.ArgumentParser(description="planted bugs the CPU run of the CUDA trainer must catch")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    args = ap.parse_args()
    mutants = parse(LIST)
    if args.list:
        for m in mutants:
            print("%s %s [%s %s]" % (m["id"], m["kind"], m["run_stem"], " ".join(m["lab_args"]) or ",".join(m["fixtures"])))
        return 0
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {m["id"] for m in mutants}
        if unknown:
            print("FAIL mutants: unknown id(s) %s (HINT: --list)" % ",".join(sorted(unknown)))
            return 1
        mutants = [m for m in mutants if m["id"] in wanted]
    manifest_path = os.path.join(ROOT, "dev", "fixtures", "manifest.tsv")
    if not os.path.exists(manifest_path):
        print("FAIL mutants: no %s (HINT: /usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures)" % manifest_path)
        return 1
    with open(manifest_path) as f:
        rows = {l.split("\t")[0]: l for l in f if l.strip() and not l.startswith("#")}
    source = {}
    for name in MUTABLE_FILES:
        with open(os.path.join(ROOT, name)) as f:
            source[name] = f.read()
    # a control per distinct run: the same build and run on the unmutated source
    controls, seen = [], set()
    for m in mutants:
        key = (m["run_stem"], tuple(m["fixtures"]), tuple(m["lab_args"]), tuple(m["env"]), tuple(m["args"] or []))
        if key not in seen:
            seen.add(key)
            controls.append(dict(m, id="c%02d" % (len(controls) + 1), control=True,
                                 kind="control: %s %s, unmutated" % (m["run_stem"], " ".join(
                                     m["env"] + (m["lab_args"] or [",".join(m["fixtures"])]) + (m["args"] or [])))))
    start = time.time()
    failed = 0
    os.makedirs(OUT, exist_ok=True)
    # the controls' binaries are made two at a time: their precompiled headers first, once
    sh(["make", "-s", "cudacpu-pch"], os.path.join(OUT, "control_pch_make.log"))
    why = make_pch()
    if why is not None:
        print("  mutants: no precompiled header (%s): every build parses cuda_cpu.h" % why)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [(m, pool.submit(run_mutant, m, source, rows)) for m in controls + mutants]
        for m, fut in futures:
            ok, msg = fut.result()
            failed += not ok
            print("%s mutant %s (%s): %s" % ("PASS" if ok else "FAIL", m["id"], m["kind"], msg), flush=True)
    print("  mutants: %d controls and %d planted bugs, %d FAIL, in %d s" % (len(controls), len(mutants), failed,
                                                                           time.time() - start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
