"""
initcheck_filter.py: separates compute-sanitizer initcheck reports that read memory only cuBLASLt
wrote from every other report (dev/test/gpu_suite.sh, stage sanitize_initcheck).

  python3 dev/test/initcheck_filter.py LOG --regions REGIONS [--examples N]

LOG      compute-sanitizer --tool initcheck output, every report printed (--print-limit large;
         --show-backtrace no keeps it small), ending with its "ERROR SUMMARY: N errors" line
REGIONS  what dev/test/initcheck_lt_regions.c (LD_PRELOAD) recorded in the same run: one line per
         cuBLASLt output, "lt_region <D|aux> base=0x.. esize=E rows=R cols=C ld=LD batch=B stride=S"
         (column-major R x C, leading dimension LD and batch stride S in elements of E bytes)

A report is dropped exactly when it is an "Uninitialized __global__ memory read of size N bytes"
whose N bytes from its "Address" all lie in elements some cuBLASLt call of that run wrote (inside a
region, not in the padding between its columns). Every other report is kept: reads outside those
elements, reads that straddle a region's edge, host API reports ("Uninitialized access ... on
access by cudaMemcpy source"), anything this script does not recognise.

Why that rule and nothing wider: on the 2026-11-23 H100 (CUDA 13.0), initcheck reported 710,272
uninitialized reads in the BF16 build and 0 in FP32, the first in permute_heads_kernel reading the
qkv matmul's output, while the BF16 fixture tests match every activation. The hypothesis
(dev/results/README.md; no GPU has confirmed it yet): cuBLASLt's Hopper BF16 kernels store D through
the tensor memory accelerator (cp.async.bulk), whose writes compute-sanitizer tracks for initcheck
only from 2025.4 on ("Added initcheck support for the PTX instruction cp.async.bulk", Compute
Sanitizer release notes), so their outputs look unwritten; the FP32 build's kernels store with
ordinary instructions. The log names the reading kernel and the
address, never the writer; the regions supply the writer, from the library's own descriptors. A
kernel of ours that reads past what cuBLASLt wrote, or before any write, still shows.

Prints one summary line ("initcheck_filter: T reports (ERROR SUMMARY S): D dropped, K kept"), the
dropped counts by reading kernel, and up to N (default 20) kept reports. Exit 0 only when nothing
is kept and every report counted by the summary line was printed (a report not printed cannot be
classified); 1 otherwise; 2 on a usage error. Python 3.9+, no third-party package.
"""
import argparse
import bisect
import re
import sys

REPORT_START = re.compile(r"^========= (\S.*)$")        # a report's first line; details are indented
UNINIT_READ = re.compile(r"^Uninitialized __global__ memory read of size (\d+) bytes?")
ADDRESS = re.compile(r"^=========\s+Address (0x[0-9a-fA-F]+)")
AT = re.compile(r"^=========\s+at (.*)$")
SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
NOT_REPORTS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "LEAK SUMMARY", "Target application returned")
REGION = re.compile(r"^lt_region (\S+) base=(0x[0-9a-fA-F]+|\(nil\)) esize=(\d+) rows=(\d+) cols=(\d+) ld=(\d+) "
                    r"batch=(\d+) stride=(\d+)\s*$")


class Region:
    def __init__(self, kind, base, esize, rows, cols, ld, batch, stride):
        self.kind, self.base, self.esize = kind, base, esize
        self.rows, self.cols, self.ld, self.batch, self.stride = rows, cols, max(ld, rows), max(batch, 1), stride
        span = ((self.cols - 1) * self.ld + self.rows) * esize if self.cols > 0 and self.rows > 0 else 0
        self.end = base + (self.batch - 1) * stride * esize + span  # one past the last byte written

    def covers(self, addr, size):
        """True when bytes [addr, addr + size) are all in elements this region's call wrote."""
        if size <= 0 or addr < self.base or addr + size > self.end:
            return False
        off = addr - self.base
        if self.batch > 1 and self.stride > 0:
            b = off // (self.stride * self.esize)
            if b >= self.batch:
                return False
            off -= b * self.stride * self.esize
        first, last = off // self.esize, (off + size - 1) // self.esize  # elements touched
        c0, r0 = divmod(first, self.ld)
        c1, r1 = divmod(last, self.ld)
        if c1 >= self.cols or r0 >= self.rows or r1 >= self.rows:
            return False
        # spanning columns: only where no padding lies between them
        return c0 == c1 or self.ld == self.rows


def read_regions(path):
    regions, unsupported = {}, []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            m = REGION.match(line)
            if m:
                base = 0 if m.group(2) == "(nil)" else int(m.group(2), 16)
                key = (m.group(1), base) + tuple(int(g) for g in m.groups()[2:])
                regions[key] = Region(m.group(1), base, *[int(g) for g in m.groups()[2:]])
            elif line.startswith("lt_unsupported"):
                unsupported.append(line)
    return sorted(regions.values(), key=lambda r: r.base), unsupported


class Index:
    """Regions sorted by base; a lookup tries those whose base is at or below the address."""

    def __init__(self, regions):
        self.regions = regions
        self.bases = [r.base for r in regions]
        self.max_end = []  # the farthest end among regions[0..i], so the scan down can stop early
        m = 0
        for r in regions:
            m = max(m, r.end)
            self.max_end.append(m)

    def covering(self, addr, size):
        i = bisect.bisect_right(self.bases, addr) - 1
        while i >= 0 and self.max_end[i] > addr:
            if self.regions[i].covers(addr, size):
                return self.regions[i]
            i -= 1
        return None


def kernel_of(at_line):
    """'void gelu_backward_kernel<(int)8>(...)+0x80 in train_gpt2.cu:703' -> 'gelu_backward_kernel'; also the
    older layout 'at 0x90 in train_gpt2.cu:760:softmax_causal_forward_kernel(...)'."""
    name = at_line.strip()
    old = re.match(r"^0x[0-9a-fA-F]+ in \S+?:\d+:(.*)$", name)
    if old:
        name = old.group(1)
    if name.startswith("void "):
        name = name[5:]
    return re.split(r"[<(+]", name, maxsplit=1)[0].strip() or "?"


def parse_log(path):
    """Yields ("report", first line, detail lines) per report as it ends, and ("summary", N) for the
    ERROR SUMMARY line; streams, so a log of a million reports needs no memory to speak of."""
    cur = None
    with open(path, errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            m = REPORT_START.match(line)
            if m or not line.startswith("=========") or line.strip("= ") == "":
                if cur is not None:  # a new report, the program's own output or the blank separator
                    yield ("report", cur[0], cur[1])
                    cur = None
            if m:
                head = m.group(1)
                s = SUMMARY.search(head)
                if s:
                    yield ("summary", int(s.group(1)))
                elif not head.startswith(NOT_REPORTS):
                    cur = (head, [])
            elif cur is not None:
                cur[1].append(line)
    if cur is not None:
        yield ("report", cur[0], cur[1])


def main():
    ap = argparse.ArgumentParser(description="drop initcheck reports of reads of cuBLASLt's outputs, keep the rest")
    ap.add_argument("log")
    ap.add_argument("--regions", required=True, help="the LT_REGIONS_FILE of the same run")
    ap.add_argument("--examples", type=int, default=20, help="kept reports to print (default 20)")
    args = ap.parse_args()
    try:
        regions, unsupported = read_regions(args.regions)
    except OSError as e:
        regions, unsupported = [], ["cannot read %s: %s" % (args.regions, e.strerror)]
    index = Index(regions)
    dropped, kept, n_kept, n_reports, summary = {}, [], 0, 0, None
    try:
        for item in parse_log(args.log):
            if item[0] == "summary":
                summary = item[1]
                continue
            _, head, details = item
            n_reports += 1
            m = UNINIT_READ.match(head)
            addr = next((int(a.group(1), 16) for a in map(ADDRESS.match, details) if a), None)
            region = index.covering(addr, int(m.group(1))) if m and addr is not None else None
            if region is None:
                n_kept += 1
                if len(kept) < args.examples:
                    kept.append((head, details))
                continue
            at = next((a.group(1) for a in map(AT.match, details) if a), "?")
            k = (kernel_of(at), region.kind)
            dropped[k] = dropped.get(k, 0) + 1
    except OSError as e:
        print("initcheck_filter: cannot read %s: %s" % (args.log, e.strerror))
        return 1
    n_drop = sum(dropped.values())
    print("initcheck_filter: %d reports (ERROR SUMMARY %s): %d dropped (reads of cuBLASLt outputs), %d kept; "
          "%d cuBLASLt output regions recorded" % (n_reports, "missing" if summary is None else summary, n_drop,
                                                   n_kept, len(regions)))
    for (kernel, kind), n in sorted(dropped.items(), key=lambda kv: -kv[1]):
        print("  dropped %8d  %s reading cuBLASLt's %s" % (n, kernel, "D" if kind == "D" else "GELU aux output"))
    for line in unsupported:
        print("  regions: %s (not understood: reads of that call's outputs are kept)" % line)
    ok = True
    if summary is None:
        print("  no ERROR SUMMARY line: the run did not finish (nothing can be concluded)")
        ok = False
    elif summary != n_reports:
        print("  the summary counts %d errors but %d reports were printed: a report not printed cannot be "
              "classified (HINT: raise --print-limit)" % (summary, n_reports))
        ok = False
    if n_reports and not regions:
        print("  no region recorded: was the shim loaded (LD_PRELOAD, LT_REGIONS_FILE)?")
    for head, details in kept:
        print("  kept: " + head)
        for d in details[:3]:
            print("        " + d.lstrip("= "))
    if n_kept > len(kept):
        print("  ... %d more kept" % (n_kept - len(kept)))
    return 0 if ok and n_kept == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
