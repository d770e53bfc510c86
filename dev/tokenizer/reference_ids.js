// Reference GPT-2 token ids from js-tiktoken (the gpt2 encoding), for dev/test/test_tokenizer.sh.
//
//   node reference_ids.js ordinary FILE          ids of the whole file, "<|endoftext|>" as plain text
//   node reference_ids.js special FILE           ids of the whole file, "<|endoftext|>" as token 50256
//   node reference_ids.js strings FILE MODE      FILE holds records (uint32 little-endian byte length,
//                                                bytes); one line of ids per record; MODE ordinary|special
//   node reference_ids.js pieces FILE            same records; one line per record with the
//                                                pre-tokenization pieces, each as hex of its UTF-8 bytes
//   node reference_ids.js classes                ranges "lo hi class" (1 letter, 2 number, 3 space) of
//                                                node's own \p{L}, \p{N}, \s over all code points
//
// Bytes are decoded as UTF-8 with WHATWG replacement (U+FFFD for each maximal invalid subpart) and the
// byte order mark kept as a character, since js-tiktoken only takes JavaScript strings.
"use strict";
const fs = require("fs");
const { getEncoding } = require("js-tiktoken");

const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

function readRecords(file) {
  const buf = fs.readFileSync(file);
  const out = [];
  let off = 0;
  while (off < buf.length) {
    if (off + 4 > buf.length) throw new Error(`${file}: truncated record header at byte ${off}`);
    const n = buf.readUInt32LE(off);
    off += 4;
    if (off + n > buf.length) throw new Error(`${file}: record of ${n} bytes runs past the end`);
    out.push(decoder.decode(buf.subarray(off, off + n)));
    off += n;
  }
  return out;
}

function encodeWith(enc, text, mode) {
  if (mode === "ordinary") return enc.encode(text, [], []);
  if (mode === "special") return enc.encode(text, "all");
  throw new Error(`mode must be ordinary or special, got ${mode}`);
}

function writeLines(lines) {
  // one write: stdout may be a pipe, and the corpus output is several MB
  fs.writeSync(1, lines.join("\n") + "\n");
}

function main() {
  const [cmd, file, mode] = process.argv.slice(2);
  if (cmd === "ordinary" || cmd === "special") {
    const enc = getEncoding("gpt2");
    const text = decoder.decode(fs.readFileSync(file));
    writeLines([encodeWith(enc, text, cmd).join(" ")]);
  } else if (cmd === "strings") {
    const enc = getEncoding("gpt2");
    writeLines(readRecords(file).map((s) => encodeWith(enc, s, mode).join(" ")));
  } else if (cmd === "pieces") {
    const enc = getEncoding("gpt2");
    const re = new RegExp(enc.patStr, "ug");
    const te = new TextEncoder();
    writeLines(readRecords(file).map((s) =>
      Array.from(s.matchAll(re), (m) => Buffer.from(te.encode(m[0])).toString("hex")).join(" ")));
  } else if (cmd === "classes") {
    const L = /^\p{L}$/u, N = /^\p{N}$/u, S = /^\s$/u;
    const lines = [];
    let cur = null;
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      const ch = String.fromCodePoint(cp);
      const k = L.test(ch) ? 1 : N.test(ch) ? 2 : S.test(ch) ? 3 : 0;
      if (cur && cur[2] === k && cur[1] === cp - 1) { cur[1] = cp; continue; }
      if (cur && cur[2] !== 0) lines.push(cur.join(" "));
      cur = [cp, cp, k];
    }
    if (cur[2] !== 0) lines.push(cur.join(" "));
    writeLines([`# node ${process.versions.node} icu ${process.versions.icu} unicode ${process.versions.unicode}`, ...lines]);
  } else {
    process.stderr.write("usage: node reference_ids.js ordinary|special FILE | strings FILE ordinary|special | pieces FILE | classes\n");
    process.exit(2);
  }
}

main();
