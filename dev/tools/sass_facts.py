#!/usr/bin/env python3
"""Per-kernel facts from `cuobjdump -sass` text: tensor-core instructions and local-memory accesses.

ptxas -v counts spilled bytes per kernel; the machine code says more, and says it for a binary as it
was built: whether the mma really became tensor-core instructions (HMMA; HGMMA for Hopper's wgmma)
and whether any local memory is touched (LDL, STL: spills, or an array the compiler could not keep
in registers). The development machine has no cuobjdump; the GPU machine has (gpu_suite.sh's
lab_check stage runs this on the attention labs).

  cuobjdump -sass build/lab_attention_backward > sass.txt
  python3 dev/tools/sass_facts.py sass.txt --match 'flash\\w*_attention_(forward|backward)' --strict flash5

One line per kernel whose name matches --match (a regex): its name (template arguments as <N>), the
count of each tensor-core opcode, LDL and STL. The kernels that also match --strict (default: all
matched) must hold a tensor-core instruction and no LDL/STL: exit 1 when one does not, 2 when the
file holds no matched kernel (with a HINT), else 0.
"""
import argparse
import re
import sys

TENSOR = ("HMMA", "HGMMA")
LOCAL = ("LDL", "STL")
FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
# "/*0a30*/   @!P0 HMMA.16816.F32.BF16 R4, R20, R28, R4 ;": the opcode after the address and predicate
INSN = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")


def readable(mangled):
    """_Z37flash5_attention_backward_dkdv_kernelILi64EEv... -> flash5_attention_backward_dkdv_kernel<64>"""
    m = re.match(r"_Z(\d+)", mangled)
    if not m:
        return mangled
    n, start = int(m.group(1)), m.end()
    name = mangled[start:start + n]
    targs = re.match(r"ILi(\d+)E", mangled[start + n:])
    return name + ("<%s>" % targs.group(1) if targs else "")


def parse(text):
    """{kernel: {opcode: count}} for every Function of the dump"""
    kernels, cur = {}, None
    for line in text.splitlines():
        f = FUNC.match(line)
        if f:
            cur = kernels.setdefault(readable(f.group(1)), {})
            continue
        i = INSN.match(line)
        if i and cur is not None:
            cur[i.group(1)] = cur.get(i.group(1), 0) + 1
    return kernels


def main():
    ap = argparse.ArgumentParser(description="tensor-core and local-memory instructions per kernel of a cuobjdump -sass dump")
    ap.add_argument("sass", help="the text of cuobjdump -sass")
    ap.add_argument("--match", default=".", help="regex: the kernels reported")
    ap.add_argument("--strict", default=None, help="regex: of those, the ones that must hold a tensor-core instruction and no LDL/STL (default: all)")
    a = ap.parse_args()
    try:
        with open(a.sass, errors="replace") as f:
            kernels = parse(f.read())
    except OSError as e:
        print("error: %s: %s" % (a.sass, e.strerror))
        return 2
    match, strict = re.compile(a.match), re.compile(a.strict) if a.strict else None
    names = sorted(k for k in kernels if match.search(k))
    if not names:
        print("error: %s: no kernel matches '%s' among %d functions (HINT: the file should be the output of "
              "cuobjdump -sass on a binary holding them)" % (a.sass, a.match, len(kernels)))
        return 2
    bad, checked = [], 0
    for k in names:
        ops = kernels[k]
        tensor = sum(ops.get(o, 0) for o in TENSOR)
        local = sum(ops.get(o, 0) for o in LOCAL)
        required = strict is None or strict.search(k)
        verdict = ""
        if required:
            checked += 1
            verdict = "ok" if tensor > 0 and local == 0 else "BAD"
            if verdict == "BAD":
                bad.append(k)
        counts = " ".join("%s %d" % (o, ops.get(o, 0)) for o in TENSOR + LOCAL)
        print("%-52s %s%s" % (k, counts, ("  " + verdict) if verdict else ""))
    if bad:
        print("sass_facts: %d of %d checked kernels lack a tensor-core instruction or touch local memory: %s"
              % (len(bad), checked, ", ".join(bad)))
        return 1
    if checked == 0:
        print("error: no reported kernel matches --strict '%s' (HINT: a kernel renamed?)" % a.strict)
        return 2
    print("sass_facts: %d checked kernels: tensor-core instructions, no LDL/STL (%d reported)" % (checked, len(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
