#!/usr/bin/env python3
"""test_docs.py: the README stays true to the code it points at (suite `docs` of `make test`).

  python3 dev/test/test_docs.py          check; one PASS/FAIL line per check
  python3 dev/test/test_docs.py --fix    rewrite the line ranges of "Reading the code" from the code

Checks:
- "Reading the code" is on the README's first screen (within its first 40 lines), and each of its
  links `[`name()` ..., FILE A-B](FILE#LA-LB)` covers exactly the definition of `name` in FILE (the
  comment lines right above it, then its body): a function that moves or grows makes the range
  stale, which this reports (and --fix repairs). "opening comment" stands for the file's first
  /* ... */ block.
- "Two commands" shows exactly two commands.
- Every Markdown file of the repository (dev/results/'s records aside) names only paths that exist:
  each relative link's target, and each dev/... or .ci/... path in its text, unless the path
  continues into a placeholder (<name>, *, {a,b}, $VAR) or git ignores it (what a run makes:
  build/, dev/data/<set>/, dev/fixtures/).
- The external spec VARIANTS.md is named only where it is the external file (dev/SCHEMES.md, which
  replaces it, and test_params.sh's optional cross-check): everything else names dev/SCHEMES.md.
- The README and dev/TESTING.md call no paper by its seed number.
- The README's table of the papers' results is dev/ablate/results_table.py's rendering of
  dev/results/ablate (the runs that came back from a GPU): "not yet run" until they do.
Exits 1 on any FAIL.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
README = os.path.join(ROOT, "README.md")
FIRST_SCREEN = 40
# [`attention_forward()`, train_gpt2.cu 2029-2064](train_gpt2.cu#L2029-L2064)
RANGE_LINK = re.compile(r"\[`([^`]+)`, ([^ \]]+) (\d+)-(\d+)\]\(([^)#]+)#L(\d+)-L(\d+)\)")

results = []


def check(ok, what):
    results.append(ok)
    print("%s docs %s" % ("PASS" if ok else "FAIL", what))


def definition_range(path, name):
    """1-based (first, last) lines of `name` in path: the comment lines right above its definition,
    then its body (a C function to its closing brace in column 0, a Python def to its dedent), or
    the file's opening /* ... */ comment for "opening comment". None when it is not there."""
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    if name == "opening comment":
        if not lines or not lines[0].startswith("/*"):
            return None
        end = next((k for k, l in enumerate(lines) if l.rstrip().endswith("*/")), None)
        return None if end is None else (1, end + 1)
    bare = name[:-2] if name.endswith("()") else name
    if path.endswith(".py"):
        pattern = re.compile(r"^(\s*)def %s\(" % re.escape(bare))
    else:  # a definition: a type and the name from column 0, the line ending in its parameters or body
        pattern = re.compile(r"^[A-Za-z_][\w\s*&<>]*\b%s\(.*[{,(]\s*$" % re.escape(bare))
    starts = [k for k, l in enumerate(lines) if pattern.search(l)]
    if len(starts) != 1:
        return None
    first = last = starts[0]
    comment = "#" if path.endswith(".py") else "//"
    # the comment lines above it, and a C++ template header between them and it
    while first > 0 and (lines[first - 1].strip().startswith(comment) or
                         (comment == "//" and lines[first - 1].startswith("template <"))):
        first -= 1
    if path.endswith(".py"):
        indent = len(lines[last]) - len(lines[last].lstrip())
        last += 1
        while last < len(lines) and (not lines[last].strip() or len(lines[last]) - len(lines[last].lstrip()) > indent):
            last += 1
        while not lines[last - 1].strip():
            last -= 1
        return first + 1, last
    while last < len(lines) and not lines[last].startswith("}"):
        last += 1
    return (first + 1, last + 1) if last < len(lines) else None


# the files that name the external spec as such (this one names it in its checks)
EXTERNAL_SPEC_FILES = ["dev/SCHEMES.md", "dev/test/test_params.sh", "dev/test/test_docs.py"]
TEXT_EXTENSIONS = {".md", ".h", ".cu", ".cuh", ".cpp", ".py", ".sh", ".txt"}
# a dev/... or .ci/... path in prose or code spans; its end: the last character of a name
REPO_PATH = re.compile(r"(?<![\w/.$-])((?:dev|\.ci)/[\w./-]*\w)([<*{$]?)")


def named_paths(body):
    """the repository paths a Markdown text names: its relative link targets (without their #anchor),
    and the dev/... and .ci/... paths of its text that do not continue into a placeholder"""
    paths = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", body)
             if not re.match(r"^[a-z]+://", t) and not t.startswith("#")}
    paths |= {m.group(1) for m in REPO_PATH.finditer(body) if not m.group(2)}
    return sorted(paths)


def missing_paths(doc, body):
    """the paths a document names that are neither in the repository (from the root, or from the
    document's folder for a link) nor ignored by git (the outputs of a run)"""
    base = os.path.dirname(doc)
    missing = []
    for p in named_paths(body):
        if os.path.exists(os.path.join(ROOT, base, p)) or os.path.exists(os.path.join(ROOT, p)):
            continue
        # a path not there yet (a fresh clone before its first run) may be an ignored folder: git's
        # folder patterns (`/dev/fixtures/`) match it only with its trailing slash
        cands = [c + s for c in (os.path.normpath(os.path.join(base, p)), p) if not c.startswith("..") for s in ("", "/")]
        for cand in cands:
            if subprocess.run(["git", "check-ignore", "-q", "--no-index", cand], cwd=ROOT).returncode == 0:
                break
        else:
            missing.append(p)
    return missing


def reading_section(text):
    start = text.find("\n## Reading the code\n")
    end = text.find("\n## ", start + 1)
    return start, end


def main():
    fix = "--fix" in sys.argv[1:]
    text = open(README, encoding="utf-8").read()
    start, end = reading_section(text)
    check(start >= 0 and text[:start].count("\n") + 1 < FIRST_SCREEN,
          "README: '## Reading the code' within its first %d lines (it is at line %s)" %
          (FIRST_SCREEN, text[:start].count("\n") + 2 if start >= 0 else "-"))
    if start < 0:
        return
    section = text[start:end]
    links = list(RANGE_LINK.finditer(section))
    check(len(links) >= 8, "README: Reading the code links %d places with line ranges (expected at least 8)" % len(links))
    fixed = section
    for m in links:
        name, path, a, b, target, la, lb = m.groups()
        if path != target or (a, b) != (la, lb):
            check(False, "README: %s: the link text says %s %s-%s, the link %s#L%s-L%s" % (name, path, a, b, target, la, lb))
            continue
        if not os.path.isfile(os.path.join(ROOT, path)):
            check(False, "README: %s: no file %s" % (name, path))
            continue
        got = definition_range(path, name)
        if got is None:
            check(False, "README: %s: no single definition of it in %s" % (name, path))
            continue
        ok = got == (int(a), int(b))
        check(ok, "README: %s is %s lines %d-%d%s" % (name, path, got[0], got[1],
                                                      "" if ok else " (the README says %s-%s; HINT: python3 dev/test/test_docs.py --fix)" % (a, b)))
        if not ok:
            fixed = fixed.replace(m.group(0), "[`%s`, %s %d-%d](%s#L%d-L%d)" % (name, path, got[0], got[1], path, got[0], got[1]))
    if fix and fixed != section:
        with open(README, "w", encoding="utf-8") as f:
            f.write(text[:start] + fixed + text[end:])
        print("docs: --fix rewrote the line ranges of README.md's Reading the code")

    # the results table is dev/results/ablate's, never typed (dev/ablate/results_table.py)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "dev", "ablate", "results_table.py"), "--check"],
                       capture_output=True, text=True)
    check(r.returncode == 0, "README: the papers' results table is what dev/ablate/results_table.py makes of "
                             "dev/results/ablate (%s)" % (r.stdout + r.stderr).strip())

    two = re.search(r"\n## Two commands\n+```bash\n(.*?)```", text, re.S)
    commands = [l for l in two.group(1).split("\n") if l.strip()] if two else []
    check(len(commands) == 2, "README: 'Two commands' shows %d commands (%s)" %
          (len(commands), "; ".join(c.split("#")[0].strip() for c in commands)))

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split("\n")
    docs = [p for p in tracked if p.endswith(".md") and not p.startswith("dev/results/")]
    named = 0
    for doc in docs:
        body = open(os.path.join(ROOT, doc), encoding="utf-8").read()
        missing = missing_paths(doc, body)
        named += len(named_paths(body))
        check(not missing, "%s names only paths of the repository%s" % (doc, ": missing " + ", ".join(missing) if missing else ""))
    check(len(docs) >= 10 and named >= 100, "the path check read %d Markdown files naming %d paths (expected at "
                                            "least 10 and 100)" % (len(docs), named))
    spec_named = [p for p in tracked if os.path.splitext(p)[1] in TEXT_EXTENSIONS and p not in EXTERNAL_SPEC_FILES and
                  not p.startswith("dev/results/") and
                  "VARIANTS.md" in open(os.path.join(ROOT, p), encoding="utf-8", errors="replace").read()]
    check(not spec_named, "the external VARIANTS.md is named only in %s%s" % (
        " and ".join(EXTERNAL_SPEC_FILES), ": also in " + ", ".join(spec_named) if spec_named else ""))
    for doc in ("README.md", "dev/TESTING.md"):
        body = open(os.path.join(ROOT, doc), encoding="utf-8").read()
        seeds = sorted(set(re.findall(r"\bseeds?\s+00\d|\bseed00\d", body, re.I)))
        check(not seeds, "%s: no paper called by its seed number%s" % (doc, ": found " + ", ".join(seeds) if seeds else ""))


if __name__ == "__main__":
    main()
    print("docs: %d passed, %d failed" % (results.count(True), results.count(False)))
    sys.exit(0 if all(results) else 1)
