"""Turns the raw dumps of prepare_mix.sh into plain text documents (standard library only).

  python3 mix_text.py kjv IN OUT        `bible -l0 gen1:1-rev22:21` output -> one document per book
  python3 mix_text.py bible IN OUT      diatheke dump of a Bible ("Book c:v: text") -> one document per book
  python3 mix_text.py commentary IN OUT diatheke dump of a commentary -> one document; the dump repeats
                                        an entry for every verse it covers, so repeated lines are dropped

OUT is one text file with the documents separated by "<|endoftext|>" (encode_text splits there).
It is written as OUT.tmp, then renamed over OUT; an OUT or OUT.tmp that is IN (by device and inode:
symlinks and hard links count) is refused before IN is read.
"""
import os
import re
import sys

EOT = "<|endoftext|>"
REF = re.compile(r"^((?:[1-4] )?[A-Z][A-Za-z ]*?) (\d+):(\d+): ?")


def refuse_output_over_input(inp, out):
    # the rename at the end would replace IN, and opening OUT.tmp would truncate it
    try:
        src = os.stat(inp)
    except OSError:
        return  # reading it says why
    for path in (out, out + ".tmp"):
        try:
            st = os.stat(path)
        except OSError:
            continue  # not there yet: a new file, not IN
        if (st.st_dev, st.st_ino) == (src.st_dev, src.st_ino):
            what = f"OUT '{out}'" if path == out else f"OUT '{out}' writes '{path}' first, which"
            sys.exit(f"mix_text: {what} is the same file as IN '{inp}': writing it would destroy the input "
                     "(HINT: write OUT to another path)")


def write_docs(docs, out):
    docs = [d.strip() for d in docs if d.strip()]
    tmp = out + ".tmp"
    # a fresh file even where a link was left at the .tmp name: "w" would write through it
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "w", encoding="utf-8") as f:
        f.write(("\n" + EOT + "\n").join(docs) + "\n")
    os.replace(tmp, out)
    print(f"mix_text: {out}: {len(docs)} documents, {sum(len(d) for d in docs)} characters")


def kjv(inp, out):
    # "Genesis 1" headings, then "  1 In the beginning ..." verses
    docs, cur = [], []
    heading = re.compile(r"^(\S.*) (\d+)$")
    verse = re.compile(r"^\s+\d+ (.*)$")
    for line in open(inp, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        m = heading.match(line)
        if m:
            if m.group(2) == "1" and cur:
                docs.append("\n".join(cur))
                cur = []
            if m.group(2) == "1":
                cur.append(m.group(1) + "\n")
            cur.append("\nChapter " + m.group(2) + "\n")
            continue
        m = verse.match(line)
        if m:
            cur.append(m.group(1))
    if cur:
        docs.append("\n".join(cur))
    write_docs(docs, out)


def bible(inp, out):
    # "Book c:v: text" starts a verse (poetry continues on the next lines); a title printed before
    # each verse of a psalm (after a blank line) is kept once
    docs, cur = [], []
    book, chapter, last_heading = None, None, None
    pending = []

    def flush_pending(at_verse):
        nonlocal pending, last_heading
        blanks = [i for i, l in enumerate(pending) if not l.strip()]
        cut = blanks[-1] if (blanks and at_verse) else len(pending)
        cont = [l.strip() for l in pending[:cut] if l.strip()]
        heading = [l.strip() for l in pending[cut:] if l.strip()]
        if cont and cur:
            cur[-1] = cur[-1] + "\n" + "\n".join(cont)
        pending = []
        return heading

    for line in open(inp, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        m = REF.match(line.lstrip())
        if not m:
            pending.append(line)
            continue
        heading = flush_pending(True)
        text = line.lstrip()[m.end():].strip()
        if m.group(1) != book:
            if cur:
                docs.append("\n".join(cur))
            cur, book, chapter, last_heading = [m.group(1) + "\n"], m.group(1), None, None
        if m.group(2) != chapter:
            chapter = m.group(2)
            cur.append("\nChapter " + chapter + "\n")
        if heading and heading != last_heading:
            cur.append("\n".join(heading))
            last_heading = heading
        cur.append(text)
    flush_pending(False)
    if cur and cur[-1].rstrip().endswith(")"):
        # the module name "(engWEB2015eb)" printed after the last verse
        cur[-1] = re.sub(r"\s*\([A-Za-z0-9]+\)\s*$", "", cur[-1])
    if cur:
        docs.append("\n".join(cur))
    write_docs(docs, out)


def commentary(inp, out):
    seen, lines = set(), []
    for line in open(inp, encoding="utf-8", errors="replace"):
        m = REF.match(line)
        text = (line[m.end():] if m else line).strip()
        if not text or text in seen or text.startswith("(") and text.endswith(")") and " " not in text:
            continue  # empty, a repeat, or the trailing "(MODULE)" line
        seen.add(text)
        lines.append(text)
    write_docs(["\n\n".join(lines)], out)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("kjv", "bible", "commentary"):
        sys.exit("usage: mix_text.py kjv|bible|commentary IN OUT")
    refuse_output_over_input(sys.argv[2], sys.argv[3])
    {"kjv": kjv, "bible": bible, "commentary": commentary}[sys.argv[1]](sys.argv[2], sys.argv[3])
