#!/usr/bin/env python3
"""rewrite.py: the build-time rewrite that lets g++ compile train_gpt2.cu and test_gpt2.cu for the CPU
runtime of dev/cudacpu (cuda_cpu.h). It changes only what C++ cannot spell, and nothing else:

  1. a launch   name<<<grid, block[, smem[, stream]]>>>(args...)
     becomes    cudacpu::Launch("name", __LINE__, grid, block[, smem[, stream]])(name, args...)
  2. inline PTX asm volatile("template" : outputs : inputs);
     becomes    cudacpu::ptx(cudacpu::ptx_site<__COUNTER__>(), __LINE__, "template", {cudacpu::ptx_out("+f", &(x)), ...},
                             {cudacpu::ptx_in("r", (y)), ...});
     (the runtime reads the instruction from the template once per statement, as ptxas would, and keeps
     what it read in the statement's own slot, ptx_site)
  3. dynamic shared memory  extern __shared__ [__align__(n)] T name[];
     becomes    T* const name = (T*)cudacpu::dynamic_smem();
  4. static shared memory   __shared__ [__align__(n)] T a[N], b;
     becomes    auto& a = cudacpu::shared_var<T[N]>(key, n); auto& b = cudacpu::shared_var<T>(key + 1, n);
     (storage of the running CTA, one key per declarator of the file)

Every rewrite keeps the line count (a statement spread over several lines becomes one line and blank
lines), and the output starts with `#line 1 "<file>"`, so compiler messages, __LINE__ and __FILE__ name
the original file and line. Anything the rewrite does not understand (a `<<<` it cannot parse, an asm
statement of another shape) stops it with a message naming the line.

  python3 dev/cudacpu/rewrite.py IN.cu OUT.cu
"""
import os
import re
import sys

LAUNCH = re.compile(r'\b([A-Za-z_]\w*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\(')
EXTERN_SHARED = re.compile(r'^(\s*)extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?(.+?)\s*\b([A-Za-z_]\w*)\s*\[\s*\]\s*;(.*)$')
STATIC_SHARED = re.compile(r'^(\s*)__shared__\s+(?:__align__\((\d+)\)\s+)?([A-Za-z_][\w:<> ]*?)\s+([A-Za-z_]\w*\s*(?:\[[^\]]*\]\s*)*(?:,\s*[A-Za-z_]\w*\s*(?:\[[^\]]*\]\s*)*)*);(.*)$')
ASM = re.compile(r'\basm\s*(?:volatile\s*)?\(')


def fail(path, line, msg):
    sys.stderr.write(f"rewrite.py: {path}:{line}: {msg}\n")
    sys.exit(1)


def split_top(s, sep):
    """splits s at sep characters outside (), [], {} and string literals"""
    parts, depth, cur, i, in_str = [], 0, '', 0, False
    while i < len(s):
        ch = s[i]
        if in_str:
            cur += ch
            if ch == '\\':
                cur += s[i + 1]
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            cur += ch
        elif ch in '([{':
            depth += 1
            cur += ch
        elif ch in ')]}':
            depth -= 1
            cur += ch
        elif ch == sep and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
        i += 1
    parts.append(cur)
    return parts


def matching_paren(text, open_idx):
    """index of the ')' closing the '(' at open_idx, skipping string literals"""
    depth, i, in_str = 0, open_idx, False
    while i < len(text):
        ch = text[i]
        if in_str:
            if ch == '\\':
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == '(':
            depth += 1
        elif ch == ')':
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def rewrite_asm(path, line_no, stmt):
    """asm volatile("..." : outs : ins [: clobbers]) -> cudacpu::ptx(...)"""
    m = ASM.search(stmt)
    close = matching_paren(stmt, m.end() - 1)
    inner = stmt[m.end():close]
    sections = split_top(inner, ':')
    literals = re.findall(r'"((?:[^"\\]|\\.)*)"', sections[0])
    if not literals or re.sub(r'"((?:[^"\\]|\\.)*)"', '', sections[0]).strip():
        fail(path, line_no, "asm template is not a sequence of string literals")
    template = ''.join(literals).replace('\\n', ' ').replace('\\t', ' ').strip()

    def operands(sec, output):
        out = []
        for op in split_top(sec, ','):
            op = op.strip()
            if not op:
                continue
            mo = re.match(r'^"([^"]*)"\s*\((.*)\)$', op, re.S)
            if not mo:
                fail(path, line_no, f"asm operand '{op}' is not \"constraint\"(expression)")
            c, expr = mo.group(1), mo.group(2).strip()
            out.append(f'cudacpu::ptx_out("{c}", &({expr}))' if output else f'cudacpu::ptx_in("{c}", ({expr}))')
        return out

    outs = operands(sections[1], True) if len(sections) > 1 else []
    ins = operands(sections[2], False) if len(sections) > 2 else []
    rest = stmt[close + 1:].strip()
    if not rest.startswith(';'):
        fail(path, line_no, "asm statement does not end with ';'")
    return (stmt[:m.start()] + f'cudacpu::ptx(cudacpu::ptx_site<__COUNTER__>(), __LINE__, "{template}", {{{", ".join(outs)}}}, '
            f'{{{", ".join(ins)}}})' + rest)


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: rewrite.py IN.cu OUT.cu\n")
        sys.exit(2)
    src, dst = sys.argv[1], sys.argv[2]
    lines = open(src, encoding='utf-8').read().split('\n')
    out = []
    counts = {'launch': 0, 'asm': 0, 'extern_shared': 0, 'static_shared': 0}
    key = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        no = i + 1
        ma = ASM.search(line)
        if ma and not line.lstrip().startswith('//') and not line.lstrip().startswith('*'):
            # gather the whole statement (up to the ';' after the closing parenthesis)
            j, stmt = i, line
            while matching_paren(stmt, ASM.search(stmt).end() - 1) < 0 or not stmt[matching_paren(stmt, ASM.search(stmt).end() - 1) + 1:].strip().startswith(';'):
                j += 1
                if j >= len(lines) or j - i > 80:
                    fail(src, no, "asm statement without its end")
                stmt += '\n' + lines[j]
            out.append(rewrite_asm(src, no, stmt.replace('\n', ' ')))
            out.extend([''] * (j - i))
            counts['asm'] += 1
            i = j + 1
            continue
        me = EXTERN_SHARED.match(line)
        if me:
            indent, typ, name, tail = me.groups()
            out.append(f'{indent}{typ}* const {name} = ({typ}*)cudacpu::dynamic_smem();{tail}')
            counts['extern_shared'] += 1
            i += 1
            continue
        if '__shared__' in line and 'extern' in line.split('//')[0]:
            fail(src, no, "an extern __shared__ declaration the rewrite cannot read")
        ms = STATIC_SHARED.match(line)
        if ms:
            indent, align, typ, decls, tail = ms.groups()
            parts = []
            for d in split_top(decls, ','):
                md = re.match(r'^\s*([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$', d)
                if not md:
                    fail(src, no, f"a __shared__ declarator the rewrite cannot read: '{d}'")
                name, dims = md.group(1), md.group(2).replace(' ', '')
                al = align if align else f'alignof({typ})'
                parts.append(f'auto& {name} = cudacpu::shared_var<{typ}{dims}>({key}, {al});')
                key += 1
                counts['static_shared'] += 1
            out.append(indent + ' '.join(parts) + tail)
            i += 1
            continue
        if re.search(r'\b__shared__\b', line.split('//')[0]):
            fail(src, no, "a __shared__ declaration the rewrite cannot read")

        def launch(mo):
            name, cfg = mo.group(1), mo.group(2)
            counts['launch'] += 1
            return f'cudacpu::Launch("{name}", __LINE__, {cfg})({name}, '
        new = LAUNCH.sub(launch, line)
        new = re.sub(r'\(([A-Za-z_]\w*(?:<[^<>;]*>)?), \s*\)', r'(\1)', new)  # a launch without arguments
        if '<<<' in new.split('//')[0] or '>>>' in new.split('//')[0]:
            fail(src, no, "a kernel launch the rewrite cannot read (keep `name<<<...>>>(` on one line)")
        out.append(new)
        i += 1
    # written under a temporary name and renamed: a compiler started by a parallel make never reads
    # half a file
    tmp = f'{dst}.tmp{os.getpid()}'
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write(f'#line 1 "{src}"\n' + '\n'.join(out))
    os.replace(tmp, dst)
    sys.stderr.write(f"rewrite.py: {src}: {counts['launch']} launches, {counts['asm']} asm statements, "
                     f"{counts['extern_shared']} extern __shared__ arrays, {counts['static_shared']} static __shared__ variables\n")


if __name__ == '__main__':
    main()
