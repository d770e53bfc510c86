"""
ablate.py: `make ablate CONFIG=dev/ablate/<name>.txt [OUT=dir] [FORCE=1]`: trains every run of a config
on the same data and token budget, once per seed, one run per GPU at a time over every visible GPU (or
on the CPU, in parallel only where the cores allow), then writes runs.csv, summary.csv, loss.png and
table.md (dev/ablate/report.py) into one folder and prints table.md. Python 3 standard library only;
dev/ablate/ablate.sh runs it with /usr/bin/python3.

  /usr/bin/python3 dev/ablate/ablate.py CONFIG [OUT]   OUT defaults to ablate_<config name>/ at the root
  ABLATE_DEVICE=cpu|gpu       force the trainer (default: gpu when nvidia-smi -L lists a GPU, else cpu)
  CUDA_VISIBLE_DEVICES=0,2    the GPUs the runs may use, in this order (indices or GPU-<uuid> prefixes, as
                              CUDA reads them); unset: every GPU nvidia-smi -L lists. Each run gets one of
                              them as its own CUDA_VISIBLE_DEVICES, so the trainer sees one GPU
  ABLATE_JOBS=N               at most N runs at a time (1: one after another). GPU: at most one per GPU
                              (default: one per visible GPU). CPU: the cores are split into N equal groups,
                              each run pinned to one group with OMP_NUM_THREADS its size (default: as many
                              groups of at least CPU_CORES_PER_JOB cores as there are, else one run on
                              every core, as before runs went in parallel)
  ABLATE_STATUS_S=60          with runs in parallel, a line of their progress every this many seconds
  ABLATE_TEST_FAKE_GPUS=1     for dev/test/test_ablate.sh: schedule over the GPUs nvidia-smi lists (the test
                              puts a fake one on PATH) exactly as for the CUDA trainer, but train each run
                              on the CPU trainer with one thread
  ABLATE_PLAN_ONLY=1          check the config and every run's command with its trainer (--check_args 1),
                              print each run's command, stop: nothing is trained, created or written
  ABLATE_ESTIMATE=1           with ABLATE_PLAN_ONLY=1: calibrate and print the time estimate too (and
                              refuse a plan over 2 hours without FORCE=1); a real run always does
  FORCE=1                     train a plan estimated over 2 hours (refused in one line otherwise)
  ABLATE_RUNS="name ..."      train only these runs of the config, at all its seeds (the others are left as
                              they are), so a long config can be trained in parts into the same OUT; the
                              report covers the runs done so far (the others "not yet run")
  ABLATE_TIME_LIMIT=S         train the runs that fit in S seconds from the start: a run starts only when its
                              predicted time fits what is left, one still training at the limit is stopped
                              (SIGTERM: a checkpoint, not done); exit 0, the partial report, the rest next time
                              (dev/test/gpu_suite.sh's ablate_<config> stages: a device call each)
  ABLATE_CUDA_ARCHS="-gencode arch=compute_90,code=sm_90"   build the CUDA trainers for these only (at once)
  ABLATE_GPU_SECONDS=1        print the predicted GPU seconds of the runs OUT has no DONE of, and stop
                              (gpu_suite.sh --plan); nothing is built, checked or written

The config (plain text, `#` starts a comment; dev/ablate/README.md has the whole story):
  key = value lines, the shared block:
    data = austen|mix          a corpus, prepared by dev/data/prepare_<corpus>.sh if missing
    (or train = <pattern> and val = <pattern>: token shards of your own)
    seeds = 1337 1338 1339     every run trains once per seed (--seed: initial weights and data order
                               together), into OUT/<run>/seed_<s>/; 0 to 9223372036854775807 each
                               (the trainer's range), distinct, at most 100
    (or seed = 1337            one seed, into OUT/<run>/, as before seeds existed)
    tokens = 500 * 65536       token budget per run (a product is fine), > 0; steps = tokens / tokens
                               per step, which must divide it, so every run sees the same tokens; at
                               most 2147483646 steps (the trainer's -x)
    eval_every = 50            validation loss every N steps (-v, 1 to 2147483647; the trainer adds
                               the last step)
    flags = -e d12 -b 16 ...   trainer flags shared by every run
    checkpoint_every = 250     optional: -n, 1 to 2147483647 (default: a quarter of the steps)
    max_epochs = 1             optional: refuse runs that would read the training shards more than this many
                               times (checked against the shard headers once they are there)
    baseline = <run name>      optional: the run table.md compares with (default: the first run of
                               scheme standard; none: the relative columns are n/a)
  one run per line:  <name> <scheme> [trainer flags]   (a run's flag replaces the shared one)
Numbers the runner reads (seed, seeds, tokens, eval_every, checkpoint_every, -b, -t, -d) are decimal whole
numbers: digits only, no sign, no leading zero (010 is refused, neither 8 nor 10), each range-checked
as written (a huge value is quoted as written, never wrapped). The runner owns -i -j -o -x -v -n -y
--overwrite --seed and passes -s 0 unless the config sets -s; -b and -t must be given, so that it can
compute the steps. A run may not be named like a file the runner writes into OUT (plan.tsv, runs.csv,
summary.csv, loss.png, table.md, build_<scheme>.log).

Validation, all of it before anything is trained (every error one line, `CONFIG:LINE: ...` where a
config line is at fault): (1) the config; (2) OUT against the inputs by identity (device and inode:
OUT or a file the runner writes in it must not be the config, a data shard or a -e model, and no input
may sit inside a run's folder); (3) every run's full trainer command (each run's binary is built first)
run with --check_args 1, which makes every check the trainer makes before its first step (flags and
ranges, the model, the data shard headers, the -o folder, a checkpoint to resume) and creates nothing.
ABLATE_PLAN_ONLY=1 does (1)-(3) for the runs it would train and stops; when data = austen|mix is not
prepared yet it checks the commands against two synthetic shards (a header and zero tokens, sparse
files in a temporary folder, big enough for one batch) and says so: the real headers are then checked
by make ablate after it prepares the corpus. make ablate does (1)-(3) after preparing the data and
building, for the runs it is about to train (so a bad second run stops everything before the first
trains), then (4) times CAL_STEPS steps of each distinct run shape (no output folder: nothing written),
prints the plan and its estimated time on this machine, refuses a plan over 2 hours unless FORCE=1, and
trains, seed by seed (every run at the first seed, then the next). For each run it measures the other
processes' share of the machine's CPU (/proc/stat's busy time less the trainer's own, from wait4, and
the runner's) and writes it into DONE; table.md leaves tokens/s out above 10%.

Output, in OUT: plan.tsv (the runs and seeds and their commands), <run>/ (one seed) or <run>/seed_<s>/
with the trainer's main.log, its stdout (stdout.log), cmd.txt and, once the trainer exits 0, DONE (its
seconds and the other load), then heads.csv (the final model's head diagnostics: its trainer's
--attention_csv on the fixed probe sentence and induction probe, log in heads.log); then runs.csv,
summary.csv, loss.png, table.md. The line after each command in stdout.log, and DONE, say where the run
trained (its GPU, or its cores); DONE also holds its start and end (Unix seconds), how many runs went at a time, the
other load over the cores it was measured on, and on a GPU whether another process used that GPU
meanwhile (gpu_shared, from nvidia-smi's list of compute processes; absent where the runner could
not tell, e.g. where nvidia-smi lists no process of its own). table.md leaves tokens/s out for a run
that shared its GPU, as for one whose machine was busy.

Where runs go (plan_slots): a "slot" is a GPU, or a group of cores, that one run has to itself. Runs
are started in training order into the free slots, and a slot is given the next run when its run ends.
With one slot the trainer's output is echoed as it trains; with several it goes to each stdout.log,
and a line of every run's progress is printed each STATUS_S seconds. A run that fails stops the
scheduling: the runs still training finish (their results stand), then the runner exits non-zero. The
runner's own files are written under a temporary name and renamed. A run with DONE is skipped; an
unfinished one resumes from its latest checkpoint (-n, -y 1), or, when it died before its first
checkpoint, starts again (--overwrite 1 replaces its main.log). A finished run keeps only its final
model_*.bin (state_*.bin and older models go). A run whose command changed since it started is
refused: delete its folder or use another OUT.
"""
import ctypes
import fcntl
import glob
import os
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

# the report's own pieces (standard library at import; it loads matplotlib only to plot)
import report
from report import identity, replace_file

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SEED_MAX = 9223372036854775807   # the trainer's --seed range: [0, 2^63 - 1]
STEPS_MAX = 2147483646           # the trainer's -x range: [-1, 2^31 - 2]
EVERY_MAX = 2147483647           # the trainer's -v and -n ranges: up to 2^31 - 1
BT_MAX = 1 << 20                 # the trainer's -b and -t ranges: [1, 2^20]
D_MAX = 1 << 40                  # the trainer's -d range: -1 or [1, 2^40]
NUMBER_TEXT_MAX = 200            # longer number text is refused before it is converted
SEEDS_MAX = 100                  # seeds = ... takes at most this many
LOAD_SHARED = report.LOAD_SHARED   # other processes' CPU share above which table.md leaves tokens/s out
FORCE_OVER_S = 2 * 3600          # a plan estimated longer than this needs FORCE=1
CAL_STEPS = 2                    # calibration: steps per distinct run shape (the first one is a warm-up)
CAL_CPU_TOKENS = 1024            # calibration on the CPU: micro-batches of about this many tokens (B lowered)
KNOWN_KEYS = ("data", "train", "val", "seed", "seeds", "tokens", "eval_every", "flags", "checkpoint_every", "baseline",
              "max_epochs")
GPU_RUN_OVERHEAD_S = 20          # a GPU run's seconds beside its steps (start-up, checkpoints, head diagnostics):
                                 # a guess, used until a seed of the run has finished and its DONE says
SPEED_RE = re.compile(r"^\s*ours\s+(\S+)\s+d12\s+\d+\s+[0-9.]+\s+(\d+)\s")  # a bench table's row (dev/bench/bench.sh)
RUNNER_FLAGS = ("-i", "-j", "-o", "-x", "-v", "-n", "-y", "--overwrite", "--seed")
NOT_A_RUN_FLAGS = {  # flags that would make the trainer do something other than train this run
    "-h": "prints the usage and trains nothing", "--help": "prints the usage and trains nothing",
    "--check_args": "is how the runner checks each command", "--generate": "makes the trainer sample instead of train",
    "--prompt": "belongs to --generate, which makes the trainer sample instead of train",
    "--dump_attention": "makes the trainer write attention maps instead of train (the runner writes each run's "
                        "heads.csv itself)",
    "--attention_csv": "makes the trainer write head diagnostics instead of train (the runner writes each run's "
                       "heads.csv itself)",
    "--prompt_tokens": "belongs to --dump_attention, which makes the trainer look at attention instead of train"}
for _f in ("-pn", "-pr", "-pi", "-pf"):  # a run is one process: the runner spreads runs over GPUs instead
    NOT_A_RUN_FLAGS[_f] = "makes a run of several processes; a make ablate run is one process, and the runs go one per GPU"
REPORT_FILES = ("plan.tsv",) + report.OUTPUTS  # written by the runner and report.py into OUT
HEADS_CSV = report.HEADS_CSV     # a finished run's head diagnostics (head_diagnostics)
RUN_FILES = ("cmd.txt", "DONE", "stdout.log", "main.log", HEADS_CSV, "heads.log")  # written into OUT/<run>/
PRESETS = {"d2": (2, 128, 2), "d4": (4, 256, 4), "d6": (6, 384, 6), "d12": (12, 768, 12), "d24": (24, 1024, 16),
           "d36": (36, 1280, 20), "d48": (48, 1600, 25)}  # -e dN: n_layer, n_embd, n_head, as the trainers'
DECIMAL_RE = re.compile(r"^(0|[1-9][0-9]*)$")
PRODUCT_RE = re.compile(r"^[0-9]+([ \t]*\*[ \t]*[0-9]+)*$")
FLAG_RE = re.compile(r"^(-[a-z]|-s[lg]|-p[nrif]|--[a-z_]+)$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
CPU_CORES_PER_JOB = 8  # CPU runs go in parallel by default only when each can have this many cores: the
                       # small models of a CPU ablation stop gaining from more threads about there (chosen,
                       # not measured: the 2-core CI machine cannot), while fewer would slow every run
JOBS_MAX = 4096        # ABLATE_JOBS's range
POLL_S = 0.25          # the scheduler's tick: exits, the load, the echo of a lone run's output
GPU_POLL_S = 10        # nvidia-smi's compute processes are read this often (every tick until a run's own shows)
GPU_SEEN_WAIT_S = 60   # ... but at most this long after the run started
STATUS_S = 60          # runs in parallel: a line of their progress this often (ABLATE_STATUS_S)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def info(msg):
    print("ablate: " + msg, flush=True)


def die(msg):
    print("ablate: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def one_line(text, limit=400):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def decimal(text, lo, hi, what):
    """text as a decimal whole number in [lo, hi]: (value, None) or (None, why). `what` names the
    range in the message (e.g. "the trainer's --seed"). No arithmetic happens on text that fails."""
    if len(text) > NUMBER_TEXT_MAX:
        return None, "%d characters, out of range (expected %d to %d, %s)" % (len(text), lo, hi, what)
    if not re.fullmatch(r"[0-9]+", text):
        return None, "expected a decimal whole number (digits only, %d to %d)" % (lo, hi)
    if not DECIMAL_RE.match(text):
        return None, ("a leading zero: numbers are decimal and written without one (%s, not %s; it is not read "
                      "as octal)" % (text.lstrip("0") or "0", text))
    v = int(text)
    if not lo <= v <= hi:
        return None, "out of range (expected %d to %d, %s)" % (lo, hi, what)
    return v, None


def product(text, lo, hi, what):
    """a decimal whole number or a product of them ("480 * 65536"), in [lo, hi]: (value, None) or
    (None or the value out of range, why)"""
    if len(text) > NUMBER_TEXT_MAX:
        return None, "%d characters, out of range (expected %d to %d, %s)" % (len(text), lo, hi, what)
    if not PRODUCT_RE.match(text):
        return None, "expected a decimal whole number or a product such as 480 * 65536 (%d to %d)" % (lo, hi)
    v = 1
    for factor in re.split(r"[ \t]*\*[ \t]*", text):
        if not DECIMAL_RE.match(factor):
            return None, ("a leading zero in %s: numbers are decimal and written without one (%s, not %s; it is not "
                          "read as octal)" % (factor, factor.lstrip("0") or "0", factor))
        v *= int(factor)  # exact: Python integers do not wrap, and the text has at most 200 digits
    if not lo <= v <= hi:  # the value comes back with the reason, for a caller that says more
        return v, "%sout of range (expected %d to %d, %s)" % ("= %d, " % v if "*" in text else "", lo, hi, what)
    return v, None


class Config:
    """the parsed config: keys, runs, and every error as (line, message)"""

    def __init__(self, path, show, schemes):
        self.show = show        # as given: the name errors give
        self.path = path        # absolute: the runner works from the repository root
        self.errors = []
        self.keys, self.key_line = {}, {}
        self.runs = []          # names in config order
        self.scheme, self.flags, self.line = {}, {}, {}
        self.end = 0            # errors about something missing point at the last line
        self.run_lines = 0      # lines that are no key = value line, good runs or not
        self.schemes = schemes
        self.read(path)

    def error(self, line, msg):
        self.errors.append((line, msg))

    def read(self, path):
        with open(path, "rb") as f:
            data = f.read()
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        self.end = max(1, len(lines))
        for n, raw in enumerate(lines, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                self.error(n, "not UTF-8 text (byte 0x%02x at column %d)" % (raw[e.start], e.start + 1))
                continue
            text = text.split("#", 1)[0].rstrip("\r").strip(" \t")
            bad = next((c for c in text if (ord(c) < 32 and c != "\t") or ord(c) == 127), None)
            if bad is not None:
                self.error(n, "a control character (0x%02x): expected plain text" % ord(bad))
                continue
            if not text:
                continue
            m = re.match(r"^([A-Za-z_]+)[ \t]*=[ \t]*(.*)$", text)
            if m:
                key, value = m.group(1), m.group(2)
                if key not in KNOWN_KEYS:
                    self.error(n, "unknown key '%s' (expected one of: %s)" % (key, " ".join(KNOWN_KEYS)))
                elif key in self.keys:
                    self.error(n, "%s is set twice (first on line %d)" % (key, self.key_line[key]))
                else:
                    self.keys[key], self.key_line[key] = value, n
                continue
            words = text.split()
            self.run_lines += 1
            name, scheme = words[0], words[1] if len(words) > 1 else ""
            if not NAME_RE.match(name):
                self.error(n, "run name '%s': expected letters, digits, '.', '_' or '-' (it names a folder)" % name)
                continue
            if name.lower() in REPORT_FILES or re.fullmatch(r"build_.*\.log", name.lower()):
                self.error(n, "run name '%s' is a file the runner writes into OUT (plan.tsv, runs.csv, summary.csv, "
                              "loss.png, table.md, build_<scheme>.log): its folder would take that name (HINT: rename "
                              "the run)" % name)
                continue
            if name in self.line:
                self.error(n, "run name '%s' is used twice (first on line %d)" % (name, self.line[name]))
                continue
            if not scheme:
                self.error(n, "run '%s' has no scheme (expected: <name> <scheme> [trainer flags]; schemes: %s)"
                           % (name, " ".join(self.schemes)))
                continue
            if scheme not in self.schemes:
                self.error(n, "unknown scheme '%s' in run '%s' (HINT: one of %s)"
                           % (scheme, name, " ".join(self.schemes)))
                continue
            flags = self.check_flags(n, words[2:])
            self.runs.append(name)
            self.scheme[name], self.flags[name], self.line[name] = scheme, flags, n

    def check_flags(self, n, words):
        """(flag, value) pairs of words, each checked; errors on line n"""
        pairs = []
        i = 0
        while i < len(words):
            f = words[i]
            v = words[i + 1] if i + 1 < len(words) else None
            if not FLAG_RE.match(f):
                self.error(n, "'%s' is not a trainer flag (expected -<letter> or --<name>, each followed by its "
                              "value)" % f)
                return pairs
            if v is None or re.match(r"^--?[a-z]", v):
                self.error(n, "%s has no value (every trainer flag takes one, e.g. %s 1)" % (f, f))
                return pairs
            if f in RUNNER_FLAGS:
                self.error(n, "%s is set by the runner (HINT: use the shared keys data/train/val, seed, tokens, "
                              "eval_every, checkpoint_every)" % f)
            elif f in NOT_A_RUN_FLAGS:
                self.error(n, "%s %s: not a flag of a make ablate run: it %s" % (f, v, NOT_A_RUN_FLAGS[f]))
            elif f == "--tied" and v != "1":
                self.error(n, "--tied %s: table.md's parameter counts come from build/params, which counts tied "
                              "heads only" % v)
            pairs.append((f, v))
            i += 2
        return pairs


# ---------------------------------------------------------------------------------------------
# signals: nothing the runner started outlives it
#
# Ctrl-C (SIGINT), SIGTERM (a time limit's `timeout`, a job scheduler's cancel, `kill`, make passing on
# its own SIGTERM) and SIGHUP (the terminal or the ssh session closed; make gone, when make started the
# runner: the Makefile asks for that signal at its parent's death) all stop the runner the same way:
# each running trainer gets one SIGTERM, ends its step, writes its stop checkpoint (which the next make
# ablate resumes) and is waited for; the runner then exits 128 + the signal. A signal ignored when the
# runner starts stays ignored (nohup's SIGHUP). Every process the runner starts (trainers, builds,
# calibrations, the report) gets SIGTERM when the runner dies, however it dies, SIGKILL included
# (end_with_runner): a trainer then stops with its checkpoint as above, and make passes the signal on
# to its compilers.

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOPPED_BY = []  # the signal that stops the runner, once one came
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
RUNNER_PID = os.getpid()
try:
    LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:  # no C library to call prctl through: children outlive a SIGKILL'd runner, as before
    LIBC = None


def stop_requested(signum, frame):
    """every stop signal ends the runner as Ctrl-C does (the header of this section)"""
    if not STOPPED_BY:
        STOPPED_BY.append(signum)
    raise KeyboardInterrupt


def install_stop_signals():
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, stop_requested)


def stop_status():
    """the runner's exit status once a stop signal ended it: 128 + the signal (Ctrl-C: 130)"""
    return 128 + (STOPPED_BY[0] if STOPPED_BY else signal.SIGINT)


def end_with_runner():
    """in a child the runner starts, before it executes its program: SIGTERM to it when the runner dies
    (Linux's parent-death signal, kept across exec); at once if the runner is already gone"""
    if LIBC is not None:
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != RUNNER_PID:
        os.kill(os.getpid(), signal.SIGTERM)


def run_child(cmd, **kwargs):
    """subprocess.run of a child that ends with the runner"""
    return subprocess.run(cmd, preexec_fn=end_with_runner, **kwargs)


def main():
    started = time.time()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    install_stop_signals()
    args = sys.argv[1:]
    plan_only_env = os.environ.get("ABLATE_PLAN_ONLY", "")
    if plan_only_env not in ("", "0", "1"):
        die("ABLATE_PLAN_ONLY=%s: expected 1 (check and print the plan) or 0" % plan_only_env)
    plan_only = plan_only_env == "1"
    for var, what in (("ABLATE_ESTIMATE", "calibrate and print the time estimate in plan-only mode"),
                      ("FORCE", "train a plan estimated over %d hours" % (FORCE_OVER_S // 3600))):
        if os.environ.get(var, "") not in ("", "0", "1"):
            die("%s=%s: expected 1 (%s) or 0" % (var, os.environ[var], what))
    if not args or not args[0]:
        configs = " ".join(sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "dev/ablate/*.txt"))))
        die("no config (HINT: make ablate CONFIG=dev/ablate/toy.txt [OUT=dir]; configs: %s)" % configs)
    if len(args) > 2:
        die("expected CONFIG [OUT], got %d arguments" % len(args))
    config_show = args[0]  # the name errors and the table give
    try:
        st = os.stat(config_show)
    except OSError as e:
        die("CONFIG=%s: %s (HINT: the configs are dev/ablate/*.txt)" %
            (config_show, "no such file" if isinstance(e, FileNotFoundError) else e.strerror))
    if stat.S_ISDIR(st.st_mode):
        die("CONFIG=%s: is a folder, expected a config file (HINT: the configs are dev/ablate/*.txt)" % config_show)
    if not stat.S_ISREG(st.st_mode):
        die("CONFIG=%s: not a regular file, expected a config file (HINT: the configs are dev/ablate/*.txt)"
            % config_show)
    if not os.access(config_show, os.R_OK):
        die("CONFIG=%s: cannot read it (permission denied)" % config_show)
    config_path = os.path.abspath(config_show)
    config_name = os.path.basename(config_show)
    if config_name.endswith(".txt"):
        config_name = config_name[:-4]
    out_arg = args[1] if len(args) > 1 and args[1] else ""
    out = os.path.abspath(out_arg) if out_arg else os.path.join(ROOT, "ablate_" + config_name)
    os.chdir(ROOT)
    python = os.environ.get("PYTHON") or "/usr/bin/python3"
    device = os.environ.get("ABLATE_DEVICE", "")
    if device not in ("", "cpu", "gpu"):
        die("ABLATE_DEVICE=%s: expected cpu or gpu" % device)
    r = run_child(["make", "-s", "--no-print-directory", "schemes"], capture_output=True, text=True)
    schemes = r.stdout.split()
    if r.returncode != 0 or not schemes:
        die("make schemes failed: %s" % one_line(r.stderr or r.stdout))

    # -----------------------------------------------------------------------------------------
    # 1. the config: every line is checked and every error printed before anything runs
    cfg = Config(config_path, config_show, schemes)
    plan = check_config(cfg)
    if cfg.errors:
        for line, msg in sorted(cfg.errors, key=lambda e: e[0]):
            print("ablate: %s:%d: %s" % (config_show, line, msg), file=sys.stderr)
        sys.exit(1)
    if not plan["baseline"] and plan["baseline_key"] != "none":
        info("note: %s has no run of scheme standard and no 'baseline = <run>': table.md's columns relative to "
             "standard will be n/a" % config_show)

    if os.environ.get("ABLATE_GPU_SECONDS", "") == "1":  # dev/test/gpu_suite.sh --plan: the GPU time still to train
        gpu_seconds_left(cfg, plan, out)
        return
    status = os.environ.get("ABLATE_STATUS_S", "")
    if status:
        _, why = decimal(status, 1, 86400, "seconds")
        if why:
            die("ABLATE_STATUS_S=%s: %s (seconds between the progress lines of runs in parallel)" % (status, why))
    limit = os.environ.get("ABLATE_TIME_LIMIT", "")
    plan["limit_s"] = plan["deadline"] = None
    if limit:
        plan["limit_s"], why = decimal(limit, 1, 10 ** 8, "seconds")
        if why:
            die("ABLATE_TIME_LIMIT=%s: %s (seconds from now in which the runs must finish; what does not fit is left "
                "for the next make ablate)" % (limit, why))
        plan["deadline"] = started + plan["limit_s"]
    fake = os.environ.get("ABLATE_TEST_FAKE_GPUS", "")
    if fake not in ("", "0", "1"):
        die("ABLATE_TEST_FAKE_GPUS=%s: expected 1 (the tests' fake GPUs) or 0" % fake)
    fake = fake == "1"
    if fake and device == "gpu":
        die("ABLATE_TEST_FAKE_GPUS=1 trains on the CPU trainer, ABLATE_DEVICE=gpu asks for the CUDA one: expected one")
    if fake:
        device = "cpu"
    gpus = visible_gpus(list_gpus()) if device != "cpu" or fake else []
    if not device:
        device = "gpu" if gpus else "cpu"
    plan["device"] = device

    # -----------------------------------------------------------------------------------------
    # 2. OUT against the inputs, by identity, before anything is read by a trainer or written
    check_out(cfg, plan, out)

    done = {u: os.path.isfile(os.path.join(unit_dir(plan, out, u), "DONE")) for u in units(cfg, plan)}
    pending = [u for u in units(cfg, plan) if u[0] in plan["selected"] and not done[u]]
    plan["slots"] = plan_slots(device, gpus, fake, len(pending))
    for u in units(cfg, plan):  # a run already started with another command is refused before anything trains
        d = unit_dir(plan, out, u)
        f = os.path.join(d, "cmd.txt")
        if os.path.isfile(f):
            with open(f, errors="replace") as fh:
                old = fh.read().rstrip("\n")
            new = " ".join(run_command(cfg, plan, u, out, device))
            rel = os.path.relpath(d, out)
            if command_key(old, rel) != command_key(new, rel):
                die("run '%s' in %s was started with another command (%s), the config now gives: %s (HINT: rm -r %s to "
                    "redo it, or use another OUT=)" % (unit_label(plan, u), d, old, new, d))

    tmp = tempfile.mkdtemp(prefix="ablate.")
    try:
        if plan_only:
            plan_only_mode(cfg, plan, out, device, tmp, done)
            return
        train(cfg, plan, out, out_arg, device, python, pending, done, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def command_key(text, rel):
    """a run's command as words, its -o folder cut to rel, its place in OUT: a run carried from another
    machine's OUT (dev/test/gpu_suite.sh puts finished runs' files back on a fresh machine) compares equal
    to the same run here"""
    words = text.split()
    for i in range(len(words) - 1):
        if words[i] == "-o" and (words[i + 1] == rel or words[i + 1].endswith("/" + rel)):
            words[i + 1] = rel
    return words


def check_config(cfg):
    """the shared block and each run's steps and shape; errors into cfg.errors. Returns the plan."""
    k, kl, end = cfg.keys, cfg.key_line, cfg.end
    for key in ("tokens", "eval_every"):
        if key not in k:
            cfg.error(end, "no '%s = ...' line (the shared block needs data, seed or seeds, tokens, eval_every)" % key)
    if "seed" not in k and "seeds" not in k:
        cfg.error(end, "no 'seed = ...' or 'seeds = ...' line (the shared block needs data, seed or seeds, tokens, "
                       "eval_every)")
    data, train_pat, val_pat = k.get("data", ""), k.get("train", ""), k.get("val", "")
    if "data" in k:
        if train_pat or val_pat:
            cfg.error(kl["data"], "data = %s and train/val patterns both given (expected one of the two)" % data)
        elif not re.fullmatch(r"[A-Za-z0-9_]+", data) or not os.path.isfile("dev/data/prepare_%s.sh" % data):
            cfg.error(kl["data"], "data = %s: no dev/data/prepare_%s.sh (HINT: austen or mix, or train = / val = "
                                  "patterns)" % (data, data))
        else:
            train_pat = "dev/data/%s/%s_train_*.bin" % (data, data)
            val_pat = "dev/data/%s/%s_val_*.bin" % (data, data)
    elif not train_pat or not val_pat:
        cfg.error(end, "no data (expected 'data = austen|mix', or both 'train = <pattern>' and 'val = <pattern>')")
    else:
        for key, pat in (("train", train_pat), ("val", val_pat)):
            files = [p for p in glob.glob(pat) if os.path.isfile(p)]
            if not files:
                cfg.error(kl[key], "%s = %s: no file matches the pattern (paths are relative to the repository root)"
                          % (key, pat))
    seed = tokens = eval_every = checkpoint_every = None
    seeds = []
    if "seed" in k and "seeds" in k:
        cfg.error(kl["seeds"], "seed = and seeds = both given (first on line %d): expected one of the two (seeds = "
                               "1337 1338 1339 trains every run once per seed)" % kl["seed"])
    elif "seed" in k:
        seed, why = decimal(k["seed"], 0, SEED_MAX, "the trainer's --seed")
        if why:
            cfg.error(kl["seed"], "seed = %s: %s" % (k["seed"], why))
        else:
            seeds = [seed]
    elif "seeds" in k:
        words = k["seeds"].split()
        if not words:
            cfg.error(kl["seeds"], "seeds = : expected one or more seeds, e.g. seeds = 1337 1338 1339")
        elif len(words) > SEEDS_MAX:
            cfg.error(kl["seeds"], "seeds = ...: %d seeds, at most %d" % (len(words), SEEDS_MAX))
        for w in words[:SEEDS_MAX]:
            v, why = decimal(w, 0, SEED_MAX, "the trainer's --seed")
            if why:
                cfg.error(kl["seeds"], "seeds = %s: %s: %s" % (k["seeds"], w, why))
            elif v in seeds:
                cfg.error(kl["seeds"], "seeds = %s: %s is given twice (each seed trains every run once)"
                          % (k["seeds"], w))
            else:
                seeds.append(v)
    if "tokens" in k:
        tokens, why = product(k["tokens"], 1, STEPS_MAX * D_MAX, "tokens > 0; at most 2147483646 steps, the trainer's "
                              "-x, of at most 2^40 tokens, its -d")
        if why and tokens == 0:
            why = "expected > 0 training tokens per run"
        if why:
            tokens = None
            cfg.error(kl["tokens"], "tokens = %s: %s" % (k["tokens"], why))
    if "eval_every" in k:
        eval_every, why = decimal(k["eval_every"], 1, EVERY_MAX, "the trainer's -v; the table needs a validation loss")
        if why:
            cfg.error(kl["eval_every"], "eval_every = %s: %s" % (k["eval_every"], why))
    if "checkpoint_every" in k:
        checkpoint_every, why = decimal(k["checkpoint_every"], 1, EVERY_MAX, "the trainer's -n")
        if why:
            cfg.error(kl["checkpoint_every"], "checkpoint_every = %s: %s" % (k["checkpoint_every"], why))
    max_epochs = None
    if "max_epochs" in k:
        max_epochs, why = decimal(k["max_epochs"], 1, EVERY_MAX, "whole passes over the training shards a run may make")
        if why:
            cfg.error(kl["max_epochs"], "max_epochs = %s: %s" % (k["max_epochs"], why))
    shared = cfg.check_flags(kl["flags"], k["flags"].split()) if "flags" in k else []
    if not cfg.run_lines:
        cfg.error(end, "no runs (expected lines '<name> <scheme> [trainer flags]')")

    selected = set(cfg.runs)
    if os.environ.get("ABLATE_RUNS", "").strip():
        selected = set()
        for name in os.environ["ABLATE_RUNS"].split():
            if name not in cfg.line:
                cfg.error(end, "ABLATE_RUNS names '%s', which is no run of this config (runs: %s)"
                          % (name, " ".join(cfg.runs)))
            selected.add(name)

    baseline_key = k.get("baseline", "")
    baseline = baseline_key
    if baseline and baseline not in cfg.line:
        if baseline == "none":
            baseline = ""
        else:
            cfg.error(kl["baseline"], "baseline = %s: no run of that name (HINT: a run's name, or none)" % baseline)
    if not baseline_key:
        baseline = next((n for n in cfg.runs if cfg.scheme[n] == "standard"), "")

    plan = dict(data=data, train=train_pat, val=val_pat, seeds=seeds, per_seed="seeds" in k, tokens=tokens,
                eval_every=eval_every,
                checkpoint_every=checkpoint_every, max_epochs=max_epochs, shared=shared, selected=selected,
                baseline=baseline,
                baseline_key=baseline_key, merged={}, origin={}, steps={}, tps={}, bt={})
    # per run: the merged flags (the runner's -s 0, then the shared flags, then the run's own; a later
    # value replaces an earlier one), its tokens per step and steps, and its shape (build/params)
    if run_child(["make", "-s", "build/params"], capture_output=True).returncode != 0:
        die("could not build build/params (HINT: make build/params)")
    too_many = None
    for name in cfg.runs:
        merged, origin = {}, {}
        for line, pairs in ((None, [("-s", "0")]), (kl.get("flags"), shared), (cfg.line[name], cfg.flags[name])):
            for f, v in pairs:
                # a replaced flag keeps its first place in the order (the command in cmd.txt stays the same)
                merged[f], origin[f] = v, line
        plan["merged"][name], plan["origin"][name] = merged, origin
        vals = {}
        ok = True
        for f, lo, hi in (("-b", 1, BT_MAX), ("-t", 1, BT_MAX)):
            if f not in merged:
                cfg.error(cfg.line[name], "run '%s': -b and -t must be given in flags or on the run line, so that the "
                                          "runner can compute the steps (no %s)" % (name, f))
                ok = False
                break
            vals[f], why = decimal(merged[f], lo, hi, "the trainer's %s" % f)
            if why:
                cfg.error(origin[f], "run '%s': %s %s: %s" % (name, f, merged[f], why))
                ok = False
                break
        if not ok:
            continue
        bt = vals["-b"] * vals["-t"]
        tps = bt
        if "-d" in merged and merged["-d"] != "-1":
            tps, why = decimal(merged["-d"], 1, D_MAX, "the trainer's -d: tokens per step, or -1 for B x T")
            if why:
                cfg.error(origin["-d"], "run '%s': -d %s: %s" % (name, merged["-d"], why))
                continue
        plan["tps"][name], plan["bt"][name] = tps, bt
        if tokens is not None:
            if tokens // tps > STEPS_MAX:
                if too_many is None or tps < too_many[1]:
                    too_many = (name, tps)
            elif tokens % tps != 0:
                cfg.error(cfg.line[name], "run '%s': tokens = %s is not a multiple of its %d tokens per step (-d, "
                                          "or -b x -t), so it would not see the same tokens as the others"
                          % (name, k["tokens"], tps))
            else:
                plan["steps"][name] = tokens // tps
        shape_check(cfg, name, merged)
    if too_many:
        name, tps = too_many
        cfg.error(kl["tokens"], "tokens = %s: %d steps of %d tokens for run '%s'; the trainer's -x takes at most %d "
                                "(expected at most %d tokens)" % (k["tokens"], tokens // tps, tps, name, STEPS_MAX,
                                                                   STEPS_MAX * tps))
    return plan


def shape_check(cfg, name, merged):
    """a scheme/shape combination that build/params refuses is a config error (the trainer's
    --check_args says the same later; this one needs no trainer build). Only -e dN presets with plain
    decimal overrides; anything else is left to the trainer."""
    preset = PRESETS.get(merged.get("-e", "d12"))
    if preset is None:
        return
    L, C, H = preset
    vals = {}
    for f, default in (("--n_layer", L), ("--n_embd", C), ("--n_head", H)):
        vals[f] = merged.get(f, str(default))
    vals["--n_kv_head"] = merged.get("--n_kv_head", vals["--n_head"])
    if not DECIMAL_RE.match(vals["--n_embd"]):
        return
    vals["--mlp_hidden"] = merged.get("--mlp_hidden", str(int(vals["--n_embd"]) * 4))
    vals["--bias"] = merged.get("--bias", "1")
    shape = [vals[f] for f in ("--n_layer", "--n_embd", "--n_head", "--n_kv_head", "--mlp_hidden", "--bias")]
    if not all(DECIMAL_RE.match(v) and len(v) < 10 for v in shape):
        return
    r = run_child(["./build/params", cfg.scheme[name]] + shape, capture_output=True, text=True)
    if r.returncode != 0:
        why = one_line(r.stderr or r.stdout)
        cfg.error(cfg.line[name], "run '%s': %s" % (name, why[len("params: "):] if why.startswith("params: ") else why))


# ---------------------------------------------------------------------------------------------
# 2. OUT and the inputs

def check_out(cfg, plan, out):
    """OUT, and every file the runner, report.py and the trainers write or delete in it, must not be an
    input (the config, a data shard, a -e model file), compared by device and inode so that symlinks
    and ./x vs x are caught; no input may sit inside a run's folder (the trainer writes there and the
    runner deletes older checkpoints). One error line, before anything is read or written."""
    inputs = {}  # identity -> what it is
    for path, what in input_paths(cfg, plan):
        inputs.setdefault(identity(path), what)
    inputs.pop(None, None)
    try:
        st = os.stat(out)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as e:
        die("OUT=%s: %s" % (out, e.strerror))
    if st is not None:
        what = inputs.get((st.st_dev, st.st_ino))
        if what:
            die("OUT=%s is %s: the results would overwrite it (HINT: OUT= names a folder of its own)" % (out, what))
        if not stat.S_ISDIR(st.st_mode):
            die("OUT=%s: exists and is not a folder (HINT: OUT= names the results folder; a new name creates it)" % out)
    else:  # it will be created: the nearest existing folder above it must be a writable folder
        up = os.path.dirname(out)
        while not os.path.lexists(up):
            up = os.path.dirname(up)
        if not os.path.isdir(up) or not os.access(up, os.W_OK | os.X_OK):
            die("OUT=%s: cannot be created: %s is %s" % (out, up, "not a folder" if not os.path.isdir(up)
                                                         else "not writable"))
        return
    outputs = [os.path.join(out, f) for f in REPORT_FILES + (".lock",)]
    outputs += glob.glob(os.path.join(out, "build_*.log")) + glob.glob(os.path.join(out, ".*.tmp*"))
    run_dirs = {}
    dirs = [os.path.join(out, name) for name in cfg.runs]
    if plan["per_seed"]:  # OUT/<run> and OUT/<run>/seed_<s>: the runner writes into both
        dirs += [unit_dir(plan, out, u) for u in units(cfg, plan)]
    for d in dirs:
        outputs.append(d)
        outputs += [os.path.join(d, f) for f in RUN_FILES]
        outputs += glob.glob(os.path.join(d, "model_*.bin*")) + glob.glob(os.path.join(d, "state_*.bin*"))
        ident = identity(d)
        if ident:
            run_dirs[ident] = d
    for p in outputs:
        ident = identity(p)
        if ident in inputs:
            die("OUT=%s: %s is %s: the runner writes or deletes %s (HINT: use another OUT=, or move the input)"
                % (out, p, inputs[ident], os.path.relpath(p, out)))
    for f in REPORT_FILES + (".lock",):
        p = os.path.join(out, f)
        if os.path.exists(p) and not os.path.isfile(p):
            die("OUT=%s: %s exists and is not a file (a folder?), where the runner writes %s (HINT: move it, or use "
                "another OUT=)" % (out, p, f))
    for d in dirs:
        if os.path.lexists(d) and not os.path.isdir(d):
            die("OUT=%s: %s exists and is not a folder, where run '%s' writes its folder (HINT: move it, or use "
                "another OUT=)" % (out, d, os.path.relpath(d, out).split(os.sep)[0]))
    if run_dirs:  # an input inside a run's folder
        for path, what in input_paths(cfg, plan):
            up = os.path.dirname(os.path.abspath(path))
            while True:
                ident = identity(up)
                if ident in run_dirs:
                    die("OUT=%s: %s is inside %s, a run's folder (the trainer writes there and the runner deletes "
                        "older checkpoints) (HINT: use another OUT=, or move the input)" % (out, what, run_dirs[ident]))
                if up == os.path.dirname(up):
                    break
                up = os.path.dirname(up)


def input_paths(cfg, plan):
    """(path, what it is) of each input: the config, every data shard, each run's -e model file"""
    yield cfg.path, "the config file (CONFIG=%s)" % cfg.show
    for key, pat in (("train", plan["train"]), ("val", plan["val"])):
        for p in sorted(glob.glob(pat)) if pat else []:
            yield p, "a data shard (%s, %s)" % (p, key)
    for name in cfg.runs:
        e = plan["merged"][name].get("-e")
        if e and e not in PRESETS and os.path.exists(e):
            yield e, "the -e model of run '%s' (%s)" % (name, e)


# ---------------------------------------------------------------------------------------------
# 3. the trainers: commands, builds, --check_args

def binary_of(device, scheme):
    if device == "gpu":
        return "./train_gpt2cu" if scheme == "standard" else "./train_gpt2cu_" + scheme
    return "./build/train_gpt2_cpu_" + scheme


def units(cfg, plan):
    """(run, seed) pairs in training order: seed by seed, each seed's runs in config order, so that a
    plan stopped half-way has whole comparisons (every run at the first seeds) rather than all seeds of
    its first runs"""
    return [(n, s) for s in plan["seeds"] for n in cfg.runs]


def unit_dir(plan, out, unit):
    """a run's folder: OUT/<run> with `seed = N` (as before seeds existed), OUT/<run>/seed_<s> with
    `seeds = ...` (even one seed), so that a folder always says which seed trained it"""
    name, seed = unit
    d = os.path.join(out, name)
    return os.path.join(d, "seed_%d" % seed) if plan["per_seed"] else d


def unit_label(plan, unit):
    return "%s seed %d" % unit if plan["per_seed"] else unit[0]


def run_command(cfg, plan, unit, out, device, train=None, val=None):
    """the trainer command of a run at one seed; how it starts (-y 1 or --overwrite 1) is start_flags'"""
    name, seed = unit
    steps = plan["steps"][name]
    every = plan["checkpoint_every"] or (steps + 3) // 4
    cmd = [binary_of(device, cfg.scheme[name]), "-i", train or plan["train"], "-j", val or plan["val"],
           "-o", unit_dir(plan, out, unit), "--seed", str(seed), "-x", str(steps), "-v", str(plan["eval_every"]),
           "-n", str(every)]
    for f, v in plan["merged"][name].items():
        cmd += [f, v]
    return cmd


def start_flags(d):
    """-y 1 when d holds a checkpoint to resume (a state_N.bin beside its model_N.bin, what the trainer
    looks for), else --overwrite 1 when an attempt that died before its first checkpoint left files
    there (the trainer refuses a used folder otherwise), else nothing"""
    for s in glob.glob(os.path.join(d, "state_*.bin")):
        if os.path.isfile(s) and os.path.isfile(os.path.join(d, "model_" + os.path.basename(s)[len("state_"):])):
            return ["-y", "1"]
    if (os.path.exists(os.path.join(d, "main.log")) or glob.glob(os.path.join(d, "model_*.bin*"))
            or glob.glob(os.path.join(d, "state_*.bin*"))):
        return ["--overwrite", "1"]
    return []


def build_trainers(device, schemes, logdir, keep_log):
    """builds each scheme's trainer, its make output in logdir/build_<scheme>.log; dies on the first
    failure (one line naming the log when keep_log, else the make command). The CUDA trainers build at
    once (one nvcc each, minutes apiece), for ABLATE_CUDA_ARCHS (nvcc's -gencode flags) where it is set
    (the Makefile's CUDA_ARCHS: sm_80 and sm_90 by default)"""
    archs = os.environ.get("ABLATE_CUDA_ARCHS", "").strip()
    builds = []
    for scheme in schemes:
        if device == "gpu":
            target = ["make", "-s", "train_gpt2cu", "QKV=" + scheme] + (["CUDA_ARCHS=" + archs] if archs else [])
            if run_child(["make", "-q", "-s", "train_gpt2cu", "QKV=" + scheme], capture_output=True).returncode:
                info("building %s (nvcc, minutes the first time)" % binary_of(device, scheme))
        else:
            target = ["make", "-s", "build/train_gpt2_cpu_" + scheme]
        tmp = os.path.join(logdir, ".build_%s.log.tmp%d" % (scheme, os.getpid()))
        f = open(tmp, "w")
        builds.append((scheme, target, tmp, f, subprocess.Popen(target, stdout=f, stderr=subprocess.STDOUT, preexec_fn=end_with_runner)))
        if device != "gpu":  # the CPU builds one after another: g++ of each trainer is quick
            builds[-1][4].wait()
    failed = None
    for scheme, target, tmp, f, p in builds:
        rc = p.wait()
        f.close()
        log = os.path.join(logdir, "build_%s.log" % scheme)
        os.replace(tmp, log)  # a new file: never through a symlink someone left at that name
        if rc != 0 and failed is None:
            failed = (scheme, target, log)
    if failed:
        scheme, target, log = failed
        with open(log, errors="replace") as f:
            lines = f.read().splitlines()
        first = next((l for l in lines if "error" in l.lower()), lines[-1] if lines else "")
        die("the build of %s failed: %s (see %s)" % (binary_of(device, scheme), one_line(first, 200),
                                                     log if keep_log else "the output of " + " ".join(target)))


def synthetic_shards(tmp, tokens):
    """a train and a val shard in tmp with the llm.c header (magic 20240520, version 1, the count) and
    `tokens` zero tokens (at most 2^31 - 1, the header's limit: a batch that needs more is refused by
    the trainer as it would be on real shards), as sparse files: instant at any size"""
    tokens = min(tokens, 2147483647)
    paths = []
    for split in ("train", "val"):
        p = os.path.join(tmp, "synthetic_%s_000000.bin" % split)
        with open(p, "wb") as f:
            f.write(struct.pack("<256i", 20240520, 1, tokens, *([0] * 253)))
            f.truncate(1024 + 2 * tokens)
        paths.append(p)
    return paths


def check_runs(cfg, plan, out, device, todo, tmp, train=None, val=None):
    """each run's full command at each seed of todo with --check_args 1, as it will run (the start flags
    its folder calls for). A folder whose parent does not exist yet (OUT in plan-only, OUT/<run> before
    its first seed) is checked as a new folder under tmp, a folder that exists (--check_args creates
    nothing, and -o must have a parent). Returns the error lines (CONFIG:LINE: ...), grouped by line and
    message; [] when all pass."""
    found = {}  # (line, message) -> units
    stand_in = os.path.join(tmp, "out")
    for unit in todo:
        name = unit[0]
        cmd = run_command(cfg, plan, unit, out, device, train, val)
        d = unit_dir(plan, out, unit)
        if not os.path.isdir(os.path.dirname(d)):
            sub = os.path.join(stand_in, os.path.relpath(d, out))
            os.makedirs(os.path.dirname(sub), exist_ok=True)
            cmd[cmd.index("-o") + 1] = sub
        cmd += start_flags(d) + ["--check_args", "1"]
        try:
            r = run_child(cmd, capture_output=True, text=True, errors="replace", timeout=300)
            rc, text = r.returncode, r.stderr + r.stdout
            okline = next((l for l in r.stdout.splitlines() if l.startswith("check_args: ok")), None)
        except (OSError, subprocess.TimeoutExpired) as e:
            rc, text, okline = 1, "error: %s: %s" % (cmd[0], e), None
        if rc == 0 and okline:
            continue
        err = next((l for l in text.splitlines() if l.startswith("error")), None)
        if err is None:
            err = "exit status %d: %s" % (rc, one_line(text.strip().splitlines()[-1] if text.strip() else "no output"))
        msg = one_line(re.sub(r"^error:\s*", "", err)).replace(stand_in, out)
        line = blame(cfg, plan, name, msg)
        found.setdefault((line, msg), []).append(unit)
    errors = []
    for (line, msg), failed in found.items():
        names = []
        for n, _ in failed:
            if n not in names:
                names.append(n)
        whos = []
        for n in names:  # a run refused at some of its seeds only (a folder's state) names them
            seeds = [s for m, s in failed if m == n]
            part = plan["per_seed"] and len(seeds) < len(plan["seeds"])
            whos.append("'%s'%s" % (n, " (seed %s)" % ", ".join(map(str, seeds)) if part else ""))
        who = ("run " if len(whos) == 1 else "runs ") + ", ".join(whos)
        binary = binary_of(device, cfg.scheme[names[0]])
        errors.append((line, "%s: the trainer refuses the command (%s --check_args 1): %s" % (who, binary, msg)))
    return sorted(errors)


def blame(cfg, plan, name, msg):
    """the config line behind a trainer's message: the line that set the flag (or the value) it starts
    with (the shared keys for the runner's own flags), else the run's line"""
    m = re.match(r"^(-[a-z]{1,2}|--[a-z_]+)[ :]", msg)
    if not m:  # a message about a flag's value ("dev/x.bin: cannot open model file")
        f = next((f for f, v in plan["merged"][name].items() if msg.startswith(v + ":")), None)
        return plan["origin"][name].get(f) or cfg.line[name]
    f = m.group(1)
    kl = cfg.key_line
    owned = {"-i": kl.get("train", kl.get("data")), "-j": kl.get("val", kl.get("data")),
             "--seed": kl.get("seeds", kl.get("seed")),
             "-x": kl.get("tokens"), "-v": kl.get("eval_every"), "-n": kl.get("checkpoint_every")}
    if f in owned:
        return owned[f] or cfg.line[name]
    return plan["origin"][name].get(f) or cfg.line[name]


def print_errors(cfg, errors):
    for line, msg in errors:
        print("ablate: %s:%d: %s" % (cfg.show, line, msg), file=sys.stderr)


def data_ready(plan):
    return bool(glob.glob(plan["train"])) and bool(glob.glob(plan["val"]))


# ---------------------------------------------------------------------------------------------
# where the runs go: a slot is a GPU, or a group of cores, that one run has to itself

def list_gpus():
    """the GPUs `nvidia-smi -L` lists, [{"index", "name", "uuid"}]; [] when it lists none or is missing
    (MIG instances, its indented lines, are not listed: name them in CUDA_VISIBLE_DEVICES)"""
    try:
        r = run_child(["nvidia-smi", "-L"], capture_output=True, text=True, errors="replace", timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in r.stdout.splitlines():
        m = re.match(r"^GPU (\d+): (.*?)(?: \(UUID: (\S+)\))?$", line)
        if m:
            gpus.append({"index": m.group(1), "name": m.group(2), "uuid": m.group(3) or ""})
    return gpus


def visible_gpus(listed):
    """the GPUs the runs may use, each with "id", the CUDA_VISIBLE_DEVICES value its runs get: the
    entries of CUDA_VISIBLE_DEVICES, in its order, where it is set (an index, a GPU-<uuid> prefix or a
    MIG-<uuid>, as CUDA reads them), else every GPU listed. [] when nvidia-smi lists none. Dies in one
    line on an entry that names no listed GPU, or one GPU twice (two runs would share it)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None or not listed:
        return [dict(g, id=g["index"]) for g in listed]
    gpus = []
    for e in [x.strip() for x in env.split(",") if x.strip()]:
        if e.startswith("MIG-"):
            g = {"index": "", "name": "MIG instance", "uuid": e}
        else:
            g = next((g for g in listed if e == g["index"] or (e.startswith("GPU-") and g["uuid"].startswith(e))), None)
        if g is None:
            die("CUDA_VISIBLE_DEVICES=%s: '%s' is none of the GPUs nvidia-smi -L lists (%s) (HINT: indices or "
                "GPU-<uuid> prefixes, comma-separated; unset it to use every GPU)"
                % (env, e, ", ".join("%s %s" % (g["index"], g["uuid"]) for g in listed)))
        twice = next((x["id"] for x in gpus if x["uuid"] == g["uuid"] and x["index"] == g["index"]), None)
        if twice is not None:
            die("CUDA_VISIBLE_DEVICES=%s: '%s' and '%s' name the same GPU: one run per GPU at a time" % (env, twice, e))
        gpus.append(dict(g, id=e))
    return gpus


def core_ranges(cores):
    """[0, 1, 2, 5] -> '0-2,5'"""
    parts, i = [], 0
    while i < len(cores):
        j = i
        while j + 1 < len(cores) and cores[j + 1] == cores[j] + 1:
            j += 1
        parts.append(str(cores[i]) if i == j else "%d-%d" % (cores[i], cores[j]))
        i = j + 1
    return ",".join(parts)


def plan_slots(device, gpus, fake, n_runs):
    """the slots the n_runs runs about to train go to, one run per slot at a time: a list of dicts with
    label (for the logs), env (added to the trainer's environment), cores (the CPU numbers it is pinned
    to; None: not pinned, the load is the whole machine's) and gpu (visible_gpus' entry, or None). On
    the CUDA trainer (or with the tests' fake GPUs) a slot per visible GPU, at most ABLATE_JOBS; on the
    CPU, ABLATE_JOBS equal groups of cores, by default as many of CPU_CORES_PER_JOB cores as there are
    (at most one per run), else one unpinned slot with every core."""
    text = os.environ.get("ABLATE_JOBS", "")
    jobs = None
    if text:
        jobs, why = decimal(text, 1, JOBS_MAX, "runs at a time")
        if why:
            die("ABLATE_JOBS=%s: %s (1 trains one run after another)" % (text, why))
    if device == "gpu" or fake:
        if not gpus:  # the CUDA trainer forced where nvidia-smi lists no GPU: its environment as it is
            if jobs and jobs > 1:
                die("ABLATE_JOBS=%d: nvidia-smi -L lists no GPU here, so the runs go one after another" % jobs)
            return [{"label": "the GPU", "env": {}, "cores": None, "gpu": None}]
        if jobs and jobs > len(gpus):
            die("ABLATE_JOBS=%d: %d GPU%s visible (%s), and a run has a GPU to itself (HINT: ABLATE_JOBS=%d or "
                "fewer)" % (jobs, len(gpus), "" if len(gpus) == 1 else "s", ",".join(g["id"] for g in gpus),
                             len(gpus)))
        # CUDA numbers the GPUs fastest first unless told otherwise; nvidia-smi, whose indices these are,
        # in PCI order: PCI_BUS_ID makes an index name the same GPU for both
        env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        if fake:
            env["OMP_NUM_THREADS"] = "1"
        return [{"label": "gpu %s" % g["id"], "env": dict(env, CUDA_VISIBLE_DEVICES=g["id"]), "cores": None, "gpu": g}
                for g in gpus[:jobs or len(gpus)]]
    cores = sorted(os.sched_getaffinity(0))
    if jobs and jobs > len(cores):
        die("ABLATE_JOBS=%d: this process may use %d core%s, and a CPU run needs one at least (HINT: ABLATE_JOBS=%d "
            "or fewer)" % (jobs, len(cores), "" if len(cores) == 1 else "s", len(cores)))
    n = jobs or max(1, min(n_runs, len(cores) // CPU_CORES_PER_JOB))
    if n == 1:
        return [{"label": "the CPU", "env": {}, "cores": None, "gpu": None}]
    each = len(cores) // n
    groups = [cores[i * each:(i + 1) * each] for i in range(n)]
    return [{"label": "%s %s" % ("core" if each == 1 else "cores", core_ranges(g)), "env": {"OMP_NUM_THREADS": str(each)},
             "cores": g, "gpu": None} for g in groups]


def describe_slots(slots, device):
    """one line: where the runs go, and how that was chosen"""
    n = len(slots)
    if slots[0]["gpu"]:
        names = ", ".join("%s (%s%s)" % (s["label"], s["gpu"]["name"], ", " + s["gpu"]["uuid"] if s["gpu"]["uuid"]
                                         else "") for s in slots)
        return "%s, one per GPU: %s%s" % ("1 run at a time" if n == 1 else "%d runs at a time" % n, names,
                                            "; the CPU trainer, one thread each (ABLATE_TEST_FAKE_GPUS=1)"
                                            if device == "cpu" else "")
    if slots[0]["label"] == "the GPU":
        return "1 run at a time, on the GPU the CUDA trainer finds (nvidia-smi -L lists none)"
    if n == 1:
        cores = len(os.sched_getaffinity(0))
        return ("1 run at a time, on every core (%d; CPU runs go in parallel when each can have %d cores of its own, "
                "ABLATE_JOBS=N sets how many)" % (cores, CPU_CORES_PER_JOB))
    each = len(slots[0]["cores"])
    return "%d runs at a time, each pinned to %d core%s of its own (OMP_NUM_THREADS=%d): %s" % (
        n, each, "" if each == 1 else "s", each, "; ".join(s["label"] for s in slots))


def slot_popen_args(slot):
    """Popen's env and preexec_fn for a trainer in this slot"""
    env = dict(os.environ, **slot["env"])
    cores = slot["cores"]

    def preexec():
        end_with_runner()
        if cores:
            os.sched_setaffinity(0, cores)
    return {"env": env, "preexec_fn": preexec}


# ---------------------------------------------------------------------------------------------
# the time estimate and the machine's load

def cpu_busy():
    """(busy CPU seconds of the whole machine since boot, its cores) from /proc/stat's cpu line (user,
    nice, system, irq, softirq, steal; idle and iowait are not busy), or None where there is none"""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
        v = [int(x) for x in lines[0].split()[1:9]]
        cores = sum(1 for l in lines if re.match(r"^cpu[0-9]+ ", l))
    except (OSError, ValueError, IndexError):
        return None
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK"), cores


def other_load(busy0, busy1, own_cpu_s, wall_s):
    """the share of the machine's CPU time that others used during wall_s seconds: its busy time
    minus own_cpu_s (the trainer's and the runner's), over wall x cores, in [0, 1]; None unknown"""
    if busy0 is None or busy1 is None or wall_s <= 0:
        return None
    return min(1.0, max(0.0, (busy1[0] - busy0[0] - own_cpu_s) / (wall_s * busy1[1])))


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def shard_tokens(pattern):
    """the token count of each shard matching pattern (its header's int32 [2]), or None when there is none or
    one cannot be read"""
    counts = []
    for p in sorted(glob.glob(pattern)) if pattern else []:
        try:
            with open(p, "rb") as f:
                counts.append(struct.unpack("<3i", f.read(12))[2])
        except (OSError, struct.error):
            return None
    return counts or None


def epoch_check(cfg, plan, names):
    """how much of its training data each of names reads, as (info lines, errors as (config line, message)),
    or (None, []) when the training shards cannot be read. A run reads steps x tokens per step / (B x T)
    windows of B x T + 1 tokens; an epoch holds (N - 1) // (B x T) windows of each shard of N tokens (the
    dataloader's cut, dataloader.h), so its epochs are the windows it reads over those of an epoch. Over
    max_epochs is an error on the tokens line: a run that sees tokens again is not what the config promised."""
    pattern = plan["train"]
    counts = shard_tokens(pattern)
    if counts is None:
        return None, []
    names = [n for n in names if n in plan["steps"]]
    same = len(set((plan["steps"][n] * plan["tps"][n], plan["bt"][n]) for n in names)) == 1
    lines, errors = [], []
    for name in names:
        bt, read = plan["bt"][name], plan["steps"][name] * plan["tps"][name]
        per_epoch = sum((n - 1) // bt for n in counts if n > bt)
        if not per_epoch:
            continue  # the trainer's --check_args names the shard too small for one batch
        epochs = read / bt / per_epoch
        if not same or not lines:
            lines.append("data: %s reads %s training tokens, %.2f epoch%s of %s (%s tokens; %d windows of %s tokens "
                         "an epoch)" % ("each run" if same else "run '%s'" % name, "{:,}".format(read), epochs,
                                        "" if epochs == 1 else "s", pattern, "{:,}".format(sum(counts)), per_epoch,
                                        "{:,}".format(bt)))
        if plan["max_epochs"] is not None and read > plan["max_epochs"] * per_epoch * bt:
            most = plan["max_epochs"] * per_epoch * bt // plan["tps"][name] * plan["tps"][name]
            errors.append((cfg.key_line.get("tokens", cfg.end), "run '%s': tokens = %s reads %.2f epochs of %s, over "
                           "max_epochs = %d (HINT: tokens = %d * %d, %s tokens, is at most %d epoch%s)"
                           % (name, cfg.keys.get("tokens", "?"), epochs, pattern, plan["max_epochs"],
                              most // plan["tps"][name], plan["tps"][name], "{:,}".format(most), plan["max_epochs"],
                              "" if plan["max_epochs"] == 1 else "s")))
    return lines, errors


def val_tokens(plan):
    """tokens in the validation shards (their headers), or None when they cannot be read"""
    counts = shard_tokens(plan["val"])
    return (sum(counts) or None) if counts else None


def calibrate(cfg, plan, device, todo, enough, train=None, val=None):
    """times CAL_STEPS steps of each distinct shape among todo's runs (binary and merged flags: runs that
    differ only in their seed share one) with no -o (nothing written): one micro-batch per step (-d -1;
    on the CPU B lowered to about CAL_CPU_TOKENS tokens: its time per token hardly depends on B), the
    first step a warm-up, the last timed from its step line; the rest of the process's wall time is the
    start-up. enough(times so far) True stops early (a plan already over the limit: a d12 shape takes
    minutes on a CPU). Returns ({name: (seconds per token, start-up seconds)} of the runs timed, the
    calibration's wall seconds, shapes timed, shapes in all, the other processes' load meanwhile) or
    dies naming the shape that failed. A shape is timed alone, in the first slot (plan_slots)."""
    per_shape, per_name = {}, {}
    t0, busy0, own0 = time.time(), cpu_busy(), self_cpu()
    child0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    shapes = {}
    for name in [n for n in cfg.runs if any(u[0] == n for u in todo)]:
        merged = dict(plan["merged"][name])
        b, t = int(merged["-b"]), int(merged["-t"])
        b_cal = b if device == "gpu" else max(1, min(b, CAL_CPU_TOKENS // t))
        merged.update({"-b": str(b_cal), "-d": "-1", "-s": "0"})
        binary = binary_of(device, cfg.scheme[name])
        shapes[name] = ((binary, tuple(sorted(merged.items()))), merged, b_cal, t)
    for name, (key, merged, b_cal, t) in shapes.items():
        if key not in per_shape:
            if per_shape and enough(per_name):
                break
            binary = key[0]
            cmd = [binary, "-i", train or plan["train"], "-j", val or plan["val"], "--seed", str(plan["seeds"][0]),
                   "-x", str(CAL_STEPS), "-v", "0", "-n", "0"]
            for f, v in merged.items():
                cmd += [f, v]
            start = time.time()  # in the first slot: a CPU run with the threads and cores it will have
            r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", **slot_popen_args(plan["slots"][0]))
            wall = time.time() - start
            ms = [float(m.group(1)) for m in re.finditer(r"^step \d+/\d+ \|.*\| ([0-9.]+) ms \|", r.stdout, re.M)]
            if r.returncode != 0 or len(ms) != CAL_STEPS:
                err = next((l for l in (r.stderr + r.stdout).splitlines() if l.startswith("error")), "exit status %d"
                           % r.returncode)
                die("the time calibration of run '%s' failed (%s): %s (HINT: ABLATE_PLAN_ONLY=1 checks the config "
                    "without it)" % (name, " ".join(cmd), one_line(err, 200)))
            per_shape[key] = (ms[-1] / 1000.0 / (b_cal * t), max(0.0, wall - sum(ms) / 1000.0))
        per_name[name] = per_shape[key]
    wall = time.time() - t0
    child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (self_cpu() - own0 + child1.ru_utime + child1.ru_stime - child0.ru_utime - child0.ru_stime)
    return per_name, wall, len(per_shape), len(set(k for k, _, _, _ in shapes.values())), \
        other_load(busy0, cpu_busy(), own, wall)


def run_seconds(plan, name, per_token, startup, vtokens):
    """the predicted seconds of one run: start-up, its steps, and its validations (a forward pass, about
    a third of a training step's work per token: at step 0, every eval_every steps and the last)"""
    steps, tps, bt = plan["steps"][name], plan["tps"][name], plan["bt"][name]
    evals = steps // plan["eval_every"] + 1 + (1 if steps % plan["eval_every"] else 0)
    m = int(plan["merged"][name].get("-m", "20"))  # the trainer's default: 20 batches
    batches = vtokens // bt if vtokens else max(m, 1)
    if m > 0:
        batches = min(batches, m)
    return startup + steps * tps * per_token + evals * max(batches, 1) * bt * per_token / 3.0


def duration(seconds):
    if seconds < 90:
        return "%.0f s" % seconds
    if seconds < 5400:
        return "%.0f min" % (seconds / 60)
    if seconds < 172800:
        return "%.1f h" % (seconds / 3600)
    return "%.0f days" % (seconds / 86400)


def recorded_speeds():
    """{scheme: (tokens/s, GPU, date, record)}: each scheme's d12 training speed in the newest record under
    dev/results/ that has one (the `ours <scheme> d12 ...` rows of dev/bench/bench.sh's tables, T 1024, BF16)"""
    best = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "dev/results/*.txt"))):
        date = gpu = ""
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("date:"):
                    date = line[5:].strip()
                elif line.startswith("gpu:"):
                    gpu = line[4:].strip()
                else:
                    m = SPEED_RE.match(line)
                    if m and date >= best.get(m.group(1), (0, "", ""))[2]:
                        best[m.group(1)] = (int(m.group(2)), gpu, date, os.path.relpath(path, ROOT))
    return best


def finished_seconds(cfg, plan, out):
    """{run: seconds}: the DONE of the run's last finished seed in OUT (its seeds differ only in --seed, so
    one seed's time, measured here, predicts the next)"""
    secs = {}
    for unit in units(cfg, plan) if out else []:
        try:
            with open(os.path.join(unit_dir(plan, out, unit), "DONE")) as f:
                m = re.search(r"^seconds (\d+)$", f.read(), re.M)
        except OSError:
            continue
        if m:
            secs[unit[0]] = int(m.group(1))
    return secs


def gpu_estimate(cfg, plan, names, speeds):
    """{run: predicted seconds of one seed} from the scheme's recorded d12 speed (recorded_speeds) plus
    GPU_RUN_OVERHEAD_S; runs whose scheme has no record are left out"""
    vtokens = val_tokens(plan)
    return {n: run_seconds(plan, n, 1.0 / speeds[cfg.scheme[n]][0], GPU_RUN_OVERHEAD_S, vtokens)
            for n in names if cfg.scheme[n] in speeds and n in plan["steps"]}


def estimate(cfg, plan, device, todo, calibrate_now, how_to, train=None, val=None, out=None, limit_s=None):
    """prints the plan line (what will train, and how long that takes here) and returns {run: predicted
    seconds of one seed}, or None when calibrate_now is False (the line then says the estimate was skipped
    and how_to says how to get it). A run's prediction is, first that could be had: the DONE of a finished
    seed of it in OUT (measured here); on a GPU, its scheme's latest recorded d12 speed (recorded_speeds)
    plus GPU_RUN_OVERHEAD_S; else the calibration of its shape on this machine. Refuses a plan estimated
    over FORCE_OVER_S unless FORCE=1 or limit_s (ABLATE_TIME_LIMIT: what does not fit is not started), in
    one line."""
    if not todo:
        info("plan: nothing to train (every run of %s is done, or left out by ABLATE_RUNS)" % cfg.show)
        return {}
    n_runs = len(set(u[0] for u in todo))
    n_seeds = len(set(u[1] for u in todo))
    steps = sorted(set(plan["steps"][u[0]] for u in todo))
    total = len(cfg.runs) * len(plan["seeds"])
    what = "%d run%s (%d run%s x %d seed%s)%s x %s steps" % (
        len(todo), "" if len(todo) == 1 else "s", n_runs, "" if n_runs == 1 else "s", n_seeds,
        "" if n_seeds == 1 else "s", "" if len(todo) == total else " of %d" % total,
        "%d" % steps[0] if len(steps) == 1 else "%d-%d" % (steps[0], steps[-1]))
    if not calibrate_now:
        info("plan: %s; time estimate skipped (%s)" % (what, how_to))
        return None
    force = os.environ.get("FORCE", "") == "1" or limit_s is not None
    vtokens = val_tokens(plan) if val is None else None
    names = sorted(set(u[0] for u in todo), key=cfg.runs.index)
    measured = finished_seconds(cfg, plan, out)
    known = {n: measured[n] for n in names if n in measured}
    speeds = recorded_speeds() if device == "gpu" else {}
    recorded = {n: v for n, v in gpu_estimate(cfg, plan, names, speeds).items() if n not in known}
    known.update(recorded)

    def seconds(per_name):  # {run: seconds of one seed}: known, or from the calibration of its shape
        secs = dict(known)
        for n in per_name:
            secs.setdefault(n, run_seconds(plan, n, per_name[n][0], per_name[n][1], vtokens))
        return secs

    def seconds_of(per_name):  # the runs of todo with a prediction, each to the slot free first, in order
        free, secs = [0.0] * len(plan["slots"]), seconds(per_name)
        for n, _ in todo:
            if n in secs:
                free[free.index(min(free))] += secs[n]
        return max(free)
    rest = [u for u in todo if u[0] not in known]
    per_name, wall, timed, shapes, load = ({}, 0.0, 0, 0, None) if not rest else calibrate(
        cfg, plan, device, rest, lambda p: not force and seconds_of(p) > FORCE_OVER_S, train, val)
    total_s = seconds_of(per_name)
    partial = timed < shapes  # stopped early: the runs timed so far are over the limit already
    how, n_measured = [], sum(1 for n in names if n in measured)
    if n_measured:
        how.append("measured: %d run%s from a finished seed's DONE" % (n_measured, "" if n_measured == 1 else "s"))
    if recorded:
        src = sorted(set("%s, %s (%s)" % (speeds[cfg.scheme[n]][1], speeds[cfg.scheme[n]][2][:10],
                                           speeds[cfg.scheme[n]][3]) for n in recorded))
        how.append("%d run%s from the scheme's latest measured d12 tokens/s, %s, + %d s a run" % (
            len(recorded), "" if len(recorded) == 1 else "s", "; ".join(src), GPU_RUN_OVERHEAD_S))
    if rest:
        loaded = "" if load is None else ", other load %.0f%%%s" % (
            100 * load, ": the machine is busy, so this is pessimistic" if load > LOAD_SHARED else "")
        how.append("calibrated: %d steps of %s %d shape%s, %.0f s%s%s" % (
            CAL_STEPS, "%d of the" % timed if partial else "each of", shapes, "" if shapes == 1 else "s", wall, loaded,
            "; the others not timed: over the limit already" if partial else ""))
    jobs = len(plan["slots"])
    info("plan: %s; estimated %s%s on this machine%s (%s)"
         % (what, "at least " if partial else "", duration(total_s), "" if jobs == 1 else ", %d runs at a time" % jobs,
            "; ".join(how)))
    if total_s > FORCE_OVER_S and not force:
        die("plan: estimated %s%s on this machine, over the %d-hour limit: nothing trained (HINT: make ablate "
            "CONFIG=%s ... FORCE=1 runs it anyway; or lower tokens, or train fewer runs or seeds)"
            % ("at least " if partial else "", duration(total_s), FORCE_OVER_S // 3600, cfg.show))
    return seconds(per_name)


def gpu_seconds_left(cfg, plan, out):
    """one line, `ablate: gpu seconds left S runs left N of M`: the predicted GPU seconds of the runs (and
    seeds) that OUT has no DONE of, each from a finished seed's DONE in OUT, else its scheme's recorded speed
    (a scheme without a record: the slowest recorded)"""
    all_units = units(cfg, plan)
    left = [u for u in all_units if not os.path.isfile(os.path.join(unit_dir(plan, out, u), "DONE"))]
    speeds = recorded_speeds()
    slowest = min(v[0] for v in speeds.values()) if speeds else 100000
    for n in cfg.runs:
        speeds.setdefault(cfg.scheme[n], (slowest, "", "", ""))
    secs = gpu_estimate(cfg, plan, cfg.runs, speeds)
    secs.update(finished_seconds(cfg, plan, out))
    print("ablate: gpu seconds left %d runs left %d of %d" % (sum(secs.get(u[0], 0) for u in left), len(left),
                                                               len(all_units)))


def gpu_plan_line(cfg, plan, names):
    """the plan's time on a GPU from the latest measured tokens/s (plan-only, whatever the machine): a
    config's GPU estimate can be read on a laptop"""
    speeds = recorded_speeds()
    secs = gpu_estimate(cfg, plan, names, speeds)
    if not secs:
        return
    missing = [n for n in names if n not in secs]
    gpus = sorted(set("%s, %s" % (speeds[cfg.scheme[n]][1], speeds[cfg.scheme[n]][2][:10]) for n in secs))
    info("plan on a GPU: %d runs (%d x %d seed%s) predicted %s on one GPU from each scheme's latest measured d12 "
         "tokens/s (%s) + %d s a run%s" % (
             len(secs) * len(plan["seeds"]), len(secs), len(plan["seeds"]), "" if len(plan["seeds"]) == 1 else "s",
             duration(sum(secs.values()) * len(plan["seeds"])), "; ".join(gpus), GPU_RUN_OVERHEAD_S,
             "" if not missing else "; no record for %s" % ", ".join("%s (%s)" % (n, cfg.scheme[n]) for n in missing)))
    for n in names:
        if n in secs:
            info("  %s (%s): %s a seed at %s tokens/s (%s)" % (
                n, cfg.scheme[n], duration(secs[n]), "{:,}".format(speeds[cfg.scheme[n]][0]),
                speeds[cfg.scheme[n]][3]))


def plan_only_mode(cfg, plan, out, device, tmp, done):
    """checks every run a real invocation would train with its trainer, prints the plan, writes nothing"""
    todo = [u for u in units(cfg, plan) if u[0] in plan["selected"] and not done[u]]
    names = sorted(set(u[0] for u in todo), key=cfg.runs.index)
    build_trainers(device, sorted(set(cfg.scheme[n] for n in names), key=cfg.schemes.index), tmp, False)
    notes = []
    train = val = None
    if todo and plan["data"] and not data_ready(plan):
        need = (CAL_STEPS + 1) * max(plan["bt"][n] for n in names) + 1  # a batch per check, steps to calibrate
        train, val = synthetic_shards(tmp, need)
        notes.append("dev/data/%s is not prepared: the trainers checked each command with a synthetic shard of %d "
                     "tokens instead, so the data headers were NOT checked (make ablate prepares the corpus and checks "
                     "them before the first run trains)" % (plan["data"], need))
    if not os.path.isdir(out):
        notes.append("%s does not exist yet: each -o was checked as a new folder (the runner checked that OUT can be "
                     "created)" % out)
    errors = check_runs(cfg, plan, out, device, todo, tmp, train, val)
    epochs, epoch_errors = epoch_check(cfg, plan, names) if train is None else (None, [])
    if errors or epoch_errors:
        print_errors(cfg, errors + epoch_errors)
        sys.exit(1)
    if epochs is None and plan["max_epochs"] is not None and names:
        notes.append("max_epochs = %d is not checked: the training shards %s cannot be read yet (make ablate checks it "
                     "after preparing them)" % (plan["max_epochs"], plan["train"]))
    skipped = len(done) - len(todo)
    n = len(plan["seeds"])
    seeds = "" if not plan["per_seed"] else " x %d seed%s" % (n, "" if n == 1 else "s")
    info("%s is valid: %d runs%s on the %s trainer, %d tokens each; baseline %s; %d run command%s checked by %s "
         "(--check_args 1)%s" % (cfg.show, len(cfg.runs), seeds, device, plan["tokens"], plan["baseline"] or "none",
                                  len(todo), "" if len(todo) == 1 else "s",
                                  "its trainer" if len(todo) == 1 else "their trainers",
                                  "" if not skipped else ", %d not (done, or left out by ABLATE_RUNS)" % skipped))
    info("where: " + describe_slots(plan["slots"], device))
    for line in epochs or []:
        info(line)
    for n in notes:
        info("note: " + n)
    for unit in units(cfg, plan):
        name = unit[0]
        cmd = run_command(cfg, plan, unit, out, device)
        note = ""
        if name not in plan["selected"]:
            note = " [not in ABLATE_RUNS: not trained now]"
        elif done[unit]:
            note = " [done: skipped]"
        info("%s (%s, %d steps x %d tokens)%s: %s" % (unit_label(plan, unit), cfg.scheme[name], plan["steps"][name],
                                                      plan["tps"][name], note, " ".join(cmd)))
    env = os.environ.get("ABLATE_ESTIMATE", "")
    estimate(cfg, plan, device, todo, env == "1", "plan-only calibrates with ABLATE_ESTIMATE=1; make ablate always "
             "does, before the first run", train, val, out)
    gpu_plan_line(cfg, plan, names)


def write_file(path, text):
    """text into path through a temporary name and a rename (report.py's replace_file)"""
    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)
    replace_file(path, write)


def train(cfg, plan, out, out_arg, device, python, pending, done, tmp):
    if run_child([python, "-c", "import matplotlib, numpy"], capture_output=True).returncode != 0:
        die("%s cannot import matplotlib and numpy, which dev/ablate/report.py plots with (HINT: apt-get install "
            "python3-matplotlib python3-numpy)" % python)
    created = not os.path.isdir(out)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        die("OUT=%s: cannot create it (%s)" % (out, e.strerror))
    lock = open(os.path.join(out, ".lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        die("another make ablate is writing into %s (HINT: wait for it, or use another OUT=)" % out)

    def clean_up():  # nothing was trained: a folder this call created goes again
        if created:
            for f in glob.glob(os.path.join(out, "build_*.log")) + [os.path.join(out, ".lock")]:
                os.remove(f)
            try:
                os.rmdir(out)
            except OSError:
                pass

    def give_up(errors):
        print_errors(cfg, errors)
        clean_up()
        sys.exit(1)

    runs = cfg.runs
    names = sorted(set(u[0] for u in pending), key=runs.index)
    # the trainers, the data, then every run about to train checked by its trainer, before any trains
    build_trainers(device, sorted(set(cfg.scheme[n] for n in names), key=cfg.schemes.index), out, True)
    if pending and plan["data"]:
        rc = run_child(["bash", "dev/data/prepare_%s.sh" % plan["data"]]).returncode
        if rc != 0:
            die("bash dev/data/prepare_%s.sh exited with status %d: the corpus is not prepared" % (plan["data"], rc))
    errors = check_runs(cfg, plan, out, device, pending, tmp)
    epochs, epoch_errors = epoch_check(cfg, plan, names)
    if errors or epoch_errors:
        give_up(errors + epoch_errors)
    for line in epochs or []:
        info(line)
    try:  # the time estimate, and the refusal of a plan over the limit, before anything trains
        predicted = estimate(cfg, plan, device, pending, True, "", out=out, limit_s=plan["limit_s"])
    except SystemExit:
        clean_up()
        raise

    # the plan (report.py reads it): a row per run and seed, in training order
    rows = ["# config\t%s" % cfg.show, "# device\t%s" % device, "# where\t%s" % describe_slots(plan["slots"], device),
            "# baseline\t%s" % plan["baseline"],
            "# data\t%s" % plan["train"], "# seeds\t%s" % " ".join(map(str, plan["seeds"])),
            "# tokens\t%d" % plan["tokens"], "name\tscheme\tseed\tfolder\tsteps\ttokens_per_step\tcommand"]
    for unit in units(cfg, plan):
        name = unit[0]
        rows.append("%s\t%s\t%d\t%s\t%d\t%d\t%s" % (
            name, cfg.scheme[name], unit[1], os.path.relpath(unit_dir(plan, out, unit), out), plan["steps"][name],
            plan["tps"][name], " ".join(run_command(cfg, plan, unit, out, device))))
    write_file(os.path.join(out, "plan.tsv"), "\n".join(rows) + "\n")

    info("%s: runs %d x %d seed%s (%d to train), on the %s trainer, %d tokens each, seed%s %s, data %s; output in %s"
         % (cfg.show, len(runs), len(plan["seeds"]), "" if len(plan["seeds"]) == 1 else "s", len(pending), device,
            plan["tokens"], "" if len(plan["seeds"]) == 1 else "s", " ".join(map(str, plan["seeds"])), plan["train"],
            out))
    info("where: " + describe_slots(plan["slots"], device))
    queue = []
    for unit in units(cfg, plan):
        label = unit_label(plan, unit)
        if done[unit]:
            info("skip %s: done (%s/DONE)" % (label, unit_dir(plan, out, unit)))
        elif unit[0] not in plan["selected"]:
            info("skip %s: not in ABLATE_RUNS" % label)
        else:
            queue.append(unit)
    left = run_queue(cfg, plan, out, device, queue, predicted)

    head_diagnostics(cfg, plan, out, device)
    # runs.csv, summary.csv, loss.png, table.md, then the table: of every run, or of the runs done so far
    # (the others "not yet run") once at least one is
    undone = [u for u in units(cfg, plan) if not os.path.isfile(os.path.join(unit_dir(plan, out, u), "DONE"))]
    if len(undone) == len(done):
        return
    rc = run_child([python, "dev/ablate/report.py", out]).returncode
    if rc == 0:
        with open(os.path.join(out, "table.md")) as f:
            sys.stdout.write("\n" + f.read())
    if undone:
        names = sorted(set(u[0] for u in undone), key=runs.index)
        info("%d of %d runs done%s; table.md is partial, make ablate again trains the rest: %s (ABLATE_RUNS=\"%s\" "
             "make ablate CONFIG=%s%s)" % (
                 len(done) - len(undone), len(done),
                 "" if not left else " (%d not finished within ABLATE_TIME_LIMIT=%d)" % (len(left), plan["limit_s"]),
                 " ".join(unit_label(plan, u) for u in undone), " ".join(names), cfg.show,
                 " OUT=" + out_arg if out_arg else ""))
    sys.exit(rc)


# ---------------------------------------------------------------------------------------------
# the scheduler: runs into free slots, their exits, their load, their GPUs' other processes

class Job:
    """a run at one seed training in a slot: its process, and what the scheduler has counted of it"""

    def __init__(self, unit, label, folder, slot, proc, echo_from):
        self.unit, self.label, self.folder, self.slot, self.proc = unit, label, folder, slot, proc
        self.t0 = self.t1 = time.time()
        self.cpu_seen = 0.0         # its CPU seconds counted so far (all its threads)
        self.foreign = 0.0          # others' busy seconds on its cores (the machine's, when not pinned); None: unknown
        self.gpu_seen = False       # nvidia-smi listed its own process on its GPU at least once
        self.gpu_others = 0         # the most other processes nvidia-smi listed on its GPU at once
        self.echo_from = echo_from  # stdout.log's offset not yet echoed (one slot: the output is shown as it comes)
        self.stopped = False        # sent SIGTERM at ABLATE_TIME_LIMIT: its exit is a stop, not a failure (unless 0)


def where_text(slot):
    g = slot["gpu"]
    if g:
        return "%s (%s%s)" % (slot["label"], g["name"], ", " + g["uuid"] if g["uuid"] else "")
    return "the CPU (every core)" if slot["label"] == "the CPU" else slot["label"]


def start_job(cfg, plan, out, device, unit, slot):
    """the run's folder, cmd.txt, and the trainer started in slot, its output into stdout.log (after the
    command and a line saying where it trains)"""
    name, label, d = unit[0], unit_label(plan, unit), unit_dir(plan, out, unit)
    cmd = run_command(cfg, plan, unit, out, device)
    os.makedirs(d, exist_ok=True)
    write_file(os.path.join(d, "cmd.txt"), " ".join(cmd) + "\n")
    start = start_flags(d)
    cmd += start
    env_text = " ".join("%s=%s" % kv for kv in sorted(slot["env"].items()))
    info("run %s (%s) on %s: %d steps x %d tokens, log %s/main.log%s" % (
        label, cfg.scheme[name], slot["label"], plan["steps"][name], plan["tps"][name], d,
        " (%s)" % " ".join(start) if start else ""))
    with open(os.path.join(d, "stdout.log"), "a") as log:
        log.write(" ".join(cmd) + "\n")
        log.write("# on %s%s\n" % (where_text(slot), ", " + env_text if env_text else ""))
        log.flush()
        try:  # its own session: Ctrl-C reaches the runner only, which then stops every run with one SIGTERM
            p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **slot_popen_args(slot))
        except OSError as e:
            die("run '%s': cannot start %s (%s)" % (label, cmd[0], e.strerror))
        return Job(unit, label, d, slot, p, log.tell())


def core_busy():
    """{CPU number: busy seconds since boot} from /proc/stat's cpuN lines (busy as in cpu_busy); None
    where there is none"""
    try:
        with open("/proc/stat") as f:
            busy = {}
            for line in f:
                m = re.match(r"^cpu(\d+) (.*)$", line)
                if m:
                    v = [int(x) for x in m.group(2).split()[:8]]
                    busy[int(m.group(1))] = (sum(v) - v[3] - v[4]) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return None
    return busy or None


def process_cpu(pid):
    """a live process's CPU seconds (user + system, all its threads) from /proc/<pid>/stat; None if gone"""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return None


def runner_cpu():
    """the runner's CPU seconds, with those of the children it has waited for (trainers, nvidia-smi)"""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return self_cpu() + c.ru_utime + c.ru_stime


def count_load(jobs, spent, busy0, busy1, runner_s):
    """adds to each job the busy seconds of a tick that were not this ablation's: on an unpinned job,
    the machine's busy time less every trainer's (spent: each job's CPU seconds in the tick) and the
    runner's; on a pinned one, its own cores' busy time less its own and the runner's share (the
    runner is not pinned: its time is spread over the cores)"""
    if busy0 is None or busy1 is None:
        for j in jobs:
            j.foreign = None
        return
    ours = sum(spent.values())
    for j in jobs:
        if j.foreign is None:
            continue
        cores = j.slot["cores"] or list(busy1)
        busy = sum(busy1.get(c, 0.0) - busy0.get(c, 0.0) for c in cores)
        j.foreign += busy - (spent[j] if j.slot["cores"] else ours) - runner_s * len(cores) / len(busy1)


def gpu_processes():
    """{GPU uuid: set of pids} of the compute processes nvidia-smi lists; None when it cannot say"""
    try:
        r = run_child(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"],
                           capture_output=True, text=True, errors="replace", timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    apps = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*(\S+)\s*,\s*(\d+)\s*$", line)
        if m:
            apps.setdefault(m.group(1), set()).add(int(m.group(2)))
    return apps


def watch_gpus(jobs, ours):
    """each job's GPU in nvidia-smi's list of compute processes: is its own process there (then pids
    compare: nvidia-smi sees this PID namespace), and how many processes of nobody in this ablation
    (ours: every trainer the runner started, a run that just ended included)"""
    apps = gpu_processes()
    if apps is None:
        return
    for j in jobs:
        uuid = j.slot["gpu"]["uuid"] if j.slot["gpu"] else ""
        if uuid:
            pids = apps.get(uuid, set())
            j.gpu_seen = j.gpu_seen or j.proc.pid in pids
            j.gpu_others = max(j.gpu_others, len(pids - ours))


def echo_output(job):
    """the lone run's new output, as it comes"""
    with open(os.path.join(job.folder, "stdout.log"), "rb") as f:
        f.seek(job.echo_from)
        data = f.read()
    if data:
        job.echo_from += len(data)
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def progress(job):
    """'step 120/500' from the end of the run's stdout.log ('starting' before its first step)"""
    try:
        with open(os.path.join(job.folder, "stdout.log"), "rb") as f:
            f.seek(max(0, os.path.getsize(f.name) - 8192))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return "?"
    steps = re.findall(r"^step (\d+/\d+) ", tail, re.M)
    return "step " + steps[-1] if steps else "starting"


def finish_job(job, jobs_at_once, cores_total):
    """DONE for a run that exited 0 (keeping only its final model); the error line for one that did not"""
    label, d, rc = job.label, job.folder, job.proc.returncode
    if rc != 0:
        with open(os.path.join(d, "stdout.log"), errors="replace") as f:
            err = [l.rstrip("\n") for l in f if l.startswith("error")]
        return "run '%s' exited with status %d%s (see %s/stdout.log; make ablate again resumes from its latest " \
               "checkpoint)" % (label, rc, ": " + err[-1] if err else "", d)
    wall = job.t1 - job.t0
    cores = len(job.slot["cores"]) if job.slot["cores"] else cores_total
    load = None if job.foreign is None or wall <= 0 or not cores else \
        min(1.0, max(0.0, job.foreign / (wall * cores)))
    # DONE: seconds; the other processes' share of the CPU on the run's cores (report.py leaves tokens/s
    # out above LOAD_SHARED) and how many cores that is; where it trained, beside how many others; its
    # start and end; on a GPU, whether another process used it. A resumed run's are those of its last part.
    lines = ["seconds %d" % int(wall)]
    if load is not None:
        lines += ["other_load %.4f" % load, "cores %d" % cores]
    lines += ["device %s" % where_text(job.slot), "jobs %d" % jobs_at_once, "start %.3f" % job.t0, "end %.3f" % job.t1]
    shared = None
    if job.slot["gpu"] and job.gpu_seen:
        shared = job.gpu_others > 0
        lines.append("gpu_shared %d" % shared)
    write_file(os.path.join(d, "DONE"), "\n".join(lines) + "\n")
    # keep the final model only: the training states and older models are for resuming
    models = sorted(glob.glob(os.path.join(d, "model_*.bin")))
    for f in models[:-1] + glob.glob(os.path.join(d, "state_*.bin")):
        os.remove(f)
    notes = []
    if load is not None:
        notes.append("other processes used %.0f%% of %s meanwhile" % (
            100 * load, "its cores" if job.slot["cores"] else "the machine"))
    if shared is not None:
        notes.append("its GPU shared with another process" if shared else "its GPU to itself")
    info("run %s done in %d s on %s%s" % (label, int(wall), job.slot["label"], " (%s)" % "; ".join(notes) if notes else ""))
    return None


def stop_jobs(jobs):
    """each trainer still running gets one SIGTERM (it ends its step, writes a checkpoint into -o and
    exits; a second signal would kill it) and is waited for"""
    for j in jobs:
        if j.proc.returncode is None:
            try:
                j.proc.terminate()
            except OSError:
                pass
    for j in jobs:
        if j.proc.returncode is None:
            try:
                j.proc.wait()
            except KeyboardInterrupt:  # a second Ctrl-C: kill it
                j.proc.kill()
                j.proc.wait()


def run_queue(cfg, plan, out, device, queue, predicted=None):
    """trains queue's runs, in order, each in the first free slot; returns when all are done, dies
    (after the runs still training have finished) when one failed. With ABLATE_TIME_LIMIT (plan's
    deadline) a run starts only when its predicted seconds (estimate's) fit in the time left, and the runs
    still training at the deadline are stopped as by Ctrl-C (a checkpoint each, not done); returns the
    runs left for the next make ablate, not started or stopped"""
    slots, deadline, left, stopping = plan["slots"], plan["deadline"], [], False
    free, jobs, failed, started = list(slots), [], [], set()

    def fits(unit):
        need = (predicted or {}).get(unit[0])
        if deadline is None or need is None or time.time() + need <= deadline:
            return True
        info("not started: run %s, predicted %s, %s left of ABLATE_TIME_LIMIT=%d (the next make ablate trains it)"
             % (unit_label(plan, unit), duration(need), duration(max(0.0, deadline - time.time())), plan["limit_s"]))
        left.append(unit)
        return False
    echo = len(slots) == 1
    busy0, me0 = core_busy(), runner_cpu()
    cores_total = len(busy0) if busy0 else 0
    last_gpu_poll, last_status = 0.0, time.time()
    try:
        while jobs or (queue and not failed):
            while queue and free and not failed:
                unit = queue.pop(0)
                if fits(unit):
                    jobs.append(start_job(cfg, plan, out, device, unit, free.pop(0)))
                    started.add(jobs[-1].proc.pid)
            if not jobs:
                break
            time.sleep(POLL_S)
            now = time.time()
            if deadline is not None and now >= deadline and not stopping:
                stopping = True
                info("ABLATE_TIME_LIMIT=%d reached: stopping run%s %s (each writes a checkpoint; not done)" % (
                    plan["limit_s"], "" if len(jobs) == 1 else "s", ", ".join(j.label for j in jobs)))
                for j in jobs:
                    stop_at_deadline(j)
                left.extend(queue)
                del queue[:]
            busy1, me1 = core_busy(), runner_cpu()
            ended, spent = [], {}
            for j in jobs:
                total = reap(j, now)
                if j.proc.returncode is not None:
                    ended.append(j)
                spent[j], j.cpu_seen = max(0.0, total - j.cpu_seen), total
            ended_cpu = sum(j.cpu_seen for j in ended)
            count_load(jobs, spent, busy0, busy1, max(0.0, me1 - me0 - ended_cpu))
            busy0, me0 = busy1, me1
            running = [j for j in jobs if j not in ended]
            on_gpu = [j for j in running if j.slot["gpu"]]
            unseen = any(not j.gpu_seen and now - j.t0 < GPU_SEEN_WAIT_S for j in on_gpu)
            if on_gpu and now - last_gpu_poll >= (POLL_S if unseen else GPU_POLL_S):
                watch_gpus(running, started)  # nvidia-smi's CPU time is the runner's (RUSAGE_CHILDREN) at the next tick
                last_gpu_poll = now
            if echo:
                for j in jobs:
                    echo_output(j)
            for j in ended:
                jobs.remove(j)
                free.append(j.slot)
                if stopped_by_deadline(j):
                    left.append(j.unit)
                    info("run %s stopped at the time limit (exit %d; %s holds its checkpoint)" % (
                        j.label, j.proc.returncode, j.folder))
                    continue
                err = finish_job(j, len(slots), cores_total)
                if err:
                    failed.append(err)
                    info(err + ("; no other run starts, waiting for the %d still training" % len(jobs) if jobs else ""))
                else:  # now, on the machine that holds its model, within the time the next fit check sees
                    unit_heads(cfg, plan, out, device, j.unit)
            if not echo and jobs and now - last_status >= int(os.environ.get("ABLATE_STATUS_S") or STATUS_S):
                last_status = now
                info("%d training (%s); %d waiting" % (len(jobs), ", ".join(
                    "%s on %s at %s" % (j.label, j.slot["label"], progress(j)) for j in jobs), len(queue)))
    except KeyboardInterrupt:
        stop_jobs(jobs)
        if echo:
            for j in jobs:
                echo_output(j)  # its "stopped by SIGTERM ... checkpoint written" line
        print("ablate: interrupted during run%s %s (make ablate again resumes from the checkpoints they wrote as they "
              "stopped)" % ("" if len(jobs) == 1 else "s", ", ".join("'%s'" % j.label for j in jobs)), file=sys.stderr,
              flush=True)
        sys.exit(stop_status())
    finally:  # the runner never leaves a trainer behind (an error above, a die() in start_job)
        stop_jobs(jobs)
    if failed:
        die(failed[0] + ("" if len(failed) == 1 else " (and %d more: %s)" % (len(failed) - 1, "; ".join(failed[1:]))))
    return left


def stop_at_deadline(job):
    """SIGTERM to a run still training at ABLATE_TIME_LIMIT (it ends its step, writes a checkpoint and exits
    128 + 15). Through os.kill, not Popen.terminate: terminate polls first, and would reap a run that ended
    in the last tick, whose exit status and CPU time only reap's wait4 may take (a zombie's PID is not
    reused, so the signal cannot reach another process)"""
    job.stopped = True
    try:
        os.kill(job.proc.pid, signal.SIGTERM)
    except OSError:
        pass


def stopped_by_deadline(job):
    """an ended run that stop_at_deadline's SIGTERM stopped (kept for the next call); one that exited 0
    had finished as the deadline came, and is done"""
    return job.stopped and job.proc.returncode != 0


def reap(job, now):
    """the job's CPU seconds so far; when it has exited, also its exit status (job.proc.returncode) and its
    end (job.t1), with its whole CPU time, exactly (RUSAGE_CHILDREN now holds it too)"""
    pid, status, usage = os.wait4(job.proc.pid, os.WNOHANG)
    if pid:
        job.proc.returncode = os.waitstatus_to_exitcode(status)
        job.t1 = now
        return usage.ru_utime + usage.ru_stime
    total = process_cpu(job.proc.pid)
    return job.cpu_seen if total is None else total


def head_diagnostics(cfg, plan, out, device):
    """heads.csv beside each finished run's final model (unit_heads) where it has none yet: runs finished
    before heads.csv existed, or whose diagnostics failed before (run_queue makes each run's as it ends)"""
    for unit in units(cfg, plan):
        unit_heads(cfg, plan, out, device, unit)


def unit_heads(cfg, plan, out, device, unit):
    """heads.csv beside a finished run's final model: its trainer's inspection run (--attention_csv,
    dev/trainer/attention_maps.h) on the fixed probe sentence and the fixed induction probe, a row per head;
    report.py puts the means into summary.csv and table.md. A run that has one, or no DONE and final model,
    is left alone. A failure is a warning, not an error: the losses are the ablation's result, and the
    report shows '?' where a run has no heads.csv (make ablate again retries it)."""
    d = unit_dir(plan, out, unit)
    models = sorted(glob.glob(os.path.join(d, "model_*.bin")))
    if not os.path.isfile(os.path.join(d, "DONE")) or not models or os.path.isfile(os.path.join(d, HEADS_CSV)):
        return
    if not os.path.isfile("dev/data/gpt2/encoder.json"):  # the probe sentence is encoded with it
        rc = run_child(["bash", "dev/data/fetch_gpt2_vocab.sh"], stdout=subprocess.DEVNULL).returncode
        if rc != 0:
            info("warning: bash dev/data/fetch_gpt2_vocab.sh exited with status %d: the probe sentence of the head "
                 "diagnostics cannot be encoded for a model of GPT-2's vocabulary" % rc)
    cmd = [binary_of(device, cfg.scheme[unit[0]]), "-e", models[-1], "--attention_csv", os.path.join(d, HEADS_CSV)]
    with open(os.path.join(d, "heads.log"), "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        rc = run_child(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        with open(os.path.join(d, "heads.log"), errors="replace") as f:
            err = [l.rstrip("\n") for l in f if l.startswith("error")]
        info("warning: run '%s': the head diagnostics (%s) exited with status %d%s (see %s/heads.log; table.md "
             "shows '?'; make ablate again retries them)" % (unit_label(plan, unit), " ".join(cmd), rc,
                                                             ": " + err[-1] if err else "", d))
        return
    info("run %s: head diagnostics in %s" % (unit_label(plan, unit), os.path.join(d, HEADS_CSV)))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("ablate: interrupted", file=sys.stderr)
        sys.exit(stop_status())
