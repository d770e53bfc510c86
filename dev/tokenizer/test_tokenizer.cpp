// Tests of tokenizer.h against js-tiktoken (run by dev/test/test_tokenizer.sh, which makes the reference
// files with dev/tokenizer/reference_ids.js).
//
//   test_tokenizer gen WORK                 writes WORK/fuzz.bin (valid UTF-8 strings) and
//                                           WORK/invalid.bin (strings with invalid UTF-8)
//   test_tokenizer check VOCAB_DIR WORK AUSTEN TORTURE
//                                           compares with WORK/*.ref, prints PASS/FAIL lines
//
// Record files: per string a uint32 little-endian byte length, then the bytes.
#include "../../tokenizer.h"

#include <chrono>
#include <string>
#include <vector>

static const int kFuzzCount = 4000;
static const int kInvalidCount = 1500;
static const int kLongCount = 64;
static const uint64_t kSeed = 20240328;

static int g_pass = 0, g_fail = 0;
static void report(bool ok, const std::string& line) {
    printf("%s tokenizer %s\n", ok ? "PASS" : "FAIL", line.c_str());
    fflush(stdout);
    (ok ? g_pass : g_fail)++;
}

// ----------------------------------------------------------------------------
// files

static bool read_all(const std::string& path, std::string* out) {
    FILE* f = fopen(path.c_str(), "rb");
    if (f == NULL) { return false; }
    out->clear();
    bool ok = read_all_bytes(f, out);
    fclose(f);
    return ok;
}

static bool write_all(const std::string& path, const std::string& data) {
    std::string tmp = path + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (f == NULL) { return false; }
    bool ok = fwrite(data.data(), 1, data.size(), f) == data.size();
    ok = (fclose(f) == 0) && ok;
    return ok && rename(tmp.c_str(), path.c_str()) == 0;
}

static void put_record(std::string* out, const std::string& s) {
    uint32_t n = (uint32_t)s.size();
    out->append((const char*)&n, 4);
    out->append(s);
}

static bool read_records(const std::string& path, std::vector<std::string>* recs) {
    std::string data;
    if (!read_all(path, &data)) { return false; }
    size_t off = 0;
    while (off + 4 <= data.size()) {
        uint32_t n;
        memcpy(&n, data.data() + off, 4);
        if (off + 4 + n > data.size()) { return false; }
        recs->push_back(data.substr(off + 4, n));
        off += 4 + n;
    }
    return off == data.size();
}

// lines of space-separated integers (reference_ids.js output)
static bool read_id_lines(const std::string& path, std::vector<std::vector<int>>* lines) {
    std::string data;
    if (!read_all(path, &data)) { return false; }
    std::vector<int> cur;
    long v = 0;
    bool in_num = false;
    for (char c : data) {
        if (c >= '0' && c <= '9') { v = v * 10 + (c - '0'); in_num = true; continue; }
        if (in_num) { cur.push_back((int)v); v = 0; in_num = false; }
        if (c == '\n') { lines->push_back(cur); cur.clear(); }
    }
    if (in_num) { cur.push_back((int)v); }
    if (!cur.empty()) { lines->push_back(cur); }
    return true;
}

static std::vector<std::string> read_text_lines(const std::string& path, bool* ok) {
    std::string data;
    std::vector<std::string> lines;
    *ok = read_all(path, &data);
    size_t pos = 0;
    while (*ok && pos < data.size()) {
        size_t nl = data.find('\n', pos);
        if (nl == std::string::npos) { nl = data.size(); }
        lines.push_back(data.substr(pos, nl - pos));
        pos = nl + 1;
    }
    return lines;
}

static std::string escaped(const std::string& s, size_t max_len = 120) {
    std::string out;
    char buf[8];
    for (size_t i = 0; i < s.size() && out.size() < max_len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') { out.push_back((char)c); }
        else { snprintf(buf, sizeof(buf), "\\x%02x", c); out += buf; }
    }
    return out;
}

static std::string ids_str(const std::vector<int>& ids, size_t max_n = 30) {
    std::string out;
    for (size_t i = 0; i < ids.size() && i < max_n; i++) { out += (i ? " " : "") + std::to_string(ids[i]); }
    if (ids.size() > max_n) { out += " ..."; }
    return out;
}

// ----------------------------------------------------------------------------
// random strings

struct Rng {
    uint64_t s;
    uint64_t next() {  // splitmix64
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    uint32_t below(uint32_t n) { return (uint32_t)(next() % n); }
    uint32_t range(uint32_t lo, uint32_t hi) { return lo + below(hi - lo + 1); }  // [lo, hi]
};

// one fragment of valid UTF-8 from a mix of the cases that stress the pattern
static void valid_atom(Rng& r, std::string* s) {
    static const char* contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'x", "'", "''", "'l", "'r", "'v"};
    static const char* punct = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~";
    static const char* spaces[] = {" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\t ", "\x0b", "\x0c", "\r", "    "};
    static const uint32_t uspaces[] = {0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
                                       0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF, 0x85, 0x180E, 0x200B, 0x1C, 0x1F};
    static const char* eot_parts[] = {"<|endoftext|>", "<|endoftext|>", "<|", "|>", "endoftext", "<|endoftext", "<|endoftext|>>"};
    switch (r.below(16)) {
        case 0: case 1: {  // word, optionally with a leading space
            if (r.below(2)) { s->push_back(' '); }
            int n = r.range(1, 8);
            for (int i = 0; i < n; i++) { s->push_back((char)((r.below(4) ? 'a' : 'A') + r.below(26))); }
            break;
        }
        case 2: {
            if (r.below(3) == 0) { s->push_back(' '); }
            int n = r.range(1, 6);
            for (int i = 0; i < n; i++) { s->push_back((char)('0' + r.below(10))); }
            break;
        }
        case 3: {
            int n = r.range(1, 3);
            for (int i = 0; i < n; i++) { s->push_back(punct[r.below((uint32_t)strlen(punct))]); }
            break;
        }
        case 4: *s += spaces[r.below(sizeof(spaces) / sizeof(spaces[0]))]; break;
        case 5: *s += contractions[r.below(sizeof(contractions) / sizeof(contractions[0]))]; break;
        case 6: utf8_append(r.range(0xA0, 0xFF), s); break;  // Latin-1
        case 7: {  // CJK, kana, Hangul
            int n = r.range(1, 4);
            uint32_t base[3][2] = {{0x4E00, 0x9FFF}, {0x3040, 0x30FF}, {0xAC00, 0xD7A3}};
            int k = r.below(3);
            for (int i = 0; i < n; i++) { utf8_append(r.range(base[k][0], base[k][1]), s); }
            break;
        }
        case 8: {  // emoji, with ZWJ sequences, variation selector, skin tone
            utf8_append(r.below(2) ? r.range(0x1F300, 0x1F6FF) : r.range(0x1F900, 0x1F9FF), s);
            if (r.below(3) == 0) { utf8_append(r.range(0x1F3FB, 0x1F3FF), s); }
            if (r.below(3) == 0) { utf8_append(0xFE0F, s); }
            if (r.below(3) == 0) { utf8_append(0x200D, s); utf8_append(r.range(0x1F466, 0x1F469), s); }
            break;
        }
        case 9: {  // combining marks
            int n = r.range(1, 3);
            for (int i = 0; i < n; i++) { utf8_append(r.range(0x300, 0x36F), s); }
            break;
        }
        case 10: {  // right-to-left: Hebrew, Arabic letters, Arabic marks and digits, direction marks
            int n = r.range(1, 5);
            uint32_t base[5][2] = {{0x5D0, 0x5EA}, {0x621, 0x64A}, {0x64B, 0x652}, {0x660, 0x669}, {0x200E, 0x200F}};
            int k = r.below(5);
            for (int i = 0; i < n; i++) { utf8_append(r.range(base[k][0], base[k][1]), s); }
            break;
        }
        case 11: utf8_append(uspaces[r.below(sizeof(uspaces) / sizeof(uspaces[0]))], s); break;
        case 12: {  // other numbers
            uint32_t base[5][2] = {{0xB2, 0xB3}, {0x2160, 0x2188}, {0xFF10, 0xFF19}, {0x966, 0x96F}, {0x1D7CE, 0x1D7FF}};
            int k = r.below(5);
            utf8_append(r.range(base[k][0], base[k][1]), s);
            break;
        }
        case 13: case 14: {  // any scalar value: all planes, or the BMP
            uint32_t cp;
            do { cp = r.below(2) ? r.below(0x110000) : r.below(0x10000); } while (cp >= 0xD800 && cp <= 0xDFFF);
            utf8_append(cp, s);
            break;
        }
        default: *s += eot_parts[r.below(sizeof(eot_parts) / sizeof(eot_parts[0]))]; break;
    }
}

// one fragment that is not valid UTF-8
static void invalid_atom(Rng& r, std::string* s) {
    static const char* fixed[] = {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF",
                                  "\xED\xA0\x80", "\xED\xBF\xBF", "\xF4\x90\x80\x80", "\xF5", "\xFE", "\xFF", "\x80", "\xBF"};
    switch (r.below(4)) {
        case 0: s->push_back((char)r.range(0x80, 0xFF)); break;
        case 1: {  // a truncated multi-byte sequence
            std::string t;
            utf8_append(r.below(2) ? r.range(0x80, 0xFFFF) : r.range(0x10000, 0x10FFFF), &t);
            if (t.size() >= 2 && !((uint8_t)t[0] == 0xED && (uint8_t)t[1] >= 0xA0)) { *s += t.substr(0, r.range(1, (uint32_t)t.size() - 1)); }
            else { s->push_back('\xC3'); }
            break;
        }
        case 2: *s += fixed[r.below(sizeof(fixed) / sizeof(fixed[0]))]; break;
        default: {
            int n = r.range(1, 4);
            for (int i = 0; i < n; i++) { s->push_back((char)r.below(256)); }
            break;
        }
    }
}

static bool is_valid_utf8(const std::string& s) {
    const uint8_t* p = (const uint8_t*)s.data();
    const uint8_t* end = p + s.size();
    while (p < end) {
        uint32_t cp;
        p += utf8_decode_one(p, end, &cp);
        if (cp == 0xFFFFFFFFu) { return false; }
    }
    return true;
}

// What a WHATWG UTF-8 decoder (node's TextDecoder) makes of bytes: U+FFFD for each maximal subpart of
// an ill-formed sequence.
static std::string whatwg_replace(const std::string& s) {
    std::string out;
    const uint8_t* p = (const uint8_t*)s.data();
    size_t n = s.size(), i = 0;
    while (i < n) {
        uint8_t b = p[i];
        int need = 0;
        uint8_t lo = 0x80, hi = 0xBF;
        if (b < 0x80) { out.push_back((char)b); i++; continue; }
        if (b >= 0xC2 && b <= 0xDF) { need = 1; }
        else if (b >= 0xE0 && b <= 0xEF) { need = 2; if (b == 0xE0) { lo = 0xA0; } if (b == 0xED) { hi = 0x9F; } }
        else if (b >= 0xF0 && b <= 0xF4) { need = 3; if (b == 0xF0) { lo = 0x90; } if (b == 0xF4) { hi = 0x8F; } }
        else { out += "\xEF\xBF\xBD"; i++; continue; }
        size_t j = i + 1;
        int k = 0;
        for (; k < need; k++, j++) {
            if (j >= n || p[j] < (k == 0 ? lo : 0x80) || p[j] > (k == 0 ? hi : 0xBF)) { break; }
        }
        if (k == need) { out.append(s, i, j - i); }
        else { out += "\xEF\xBF\xBD"; }
        i = j;
    }
    return out;
}

static int cmd_gen(const std::string& work) {
    Rng r{kSeed};
    std::string fuzz, invalid;
    for (int i = 0; i < kFuzzCount; i++) {
        std::string s;
        int atoms = r.range(1, 40);
        for (int a = 0; a < atoms; a++) { valid_atom(r, &s); }
        put_record(&fuzz, s);
    }
    for (int i = 0; i < kInvalidCount; i++) {
        std::string s;
        int atoms = r.range(1, 30);
        bool any_invalid = false;
        for (int a = 0; a < atoms; a++) {
            if (r.below(3) == 0) { invalid_atom(r, &s); any_invalid = true; } else { valid_atom(r, &s); }
        }
        if (!any_invalid) { invalid_atom(r, &s); }
        if (is_valid_utf8(s)) { s.push_back('\xFF'); }  // the invalid fragments happened to form valid UTF-8
        put_record(&invalid, s);
    }
    // long pieces (the heap merge of pieces over 64 bytes): runs of one class without a break
    std::string longp;
    int n_long = 0;
    for (int i = 0; i < kLongCount; i++) {
        std::string s;
        size_t target = r.range(65, 1500);
        int kind = i % 8;
        static const char* alpha[] = {"etaoinshrdlu", "ab", "the", "xyzq", "ing", "-=_*#.!~", "0123456789", " \n\t"};
        while (s.size() < target) {
            if (kind == 3) { utf8_append(r.below(3) ? r.range(0x4E00, 0x9FFF) : r.range(0xE0, 0xFF), &s); continue; }
            const char* a = alpha[kind];
            if (kind == 1 || kind == 2 || kind == 4) { s += a; continue; }  // repeated words: long chains of equal ranks
            s.push_back(a[r.below((uint32_t)strlen(a))]);
        }
        if (i % 3 == 0) { s = " " + s; }
        if (kind == 7) { s += "x"; }
        put_record(&longp, s);
        n_long++;
    }
    if (!write_all(work + "/fuzz.bin", fuzz) || !write_all(work + "/invalid.bin", invalid) || !write_all(work + "/long.bin", longp)) {
        fprintf(stderr, "ERROR: cannot write %s/fuzz.bin, invalid.bin or long.bin\n", work.c_str());
        return 1;
    }
    printf("wrote %d fuzz strings (%zu bytes), %d invalid UTF-8 strings (%zu bytes), %d long pieces (%zu bytes) to %s\n",
           kFuzzCount, fuzz.size(), kInvalidCount, invalid.size(), n_long, longp.size(), work.c_str());
    return 0;
}

// ----------------------------------------------------------------------------
// checks

static void check_classes(const std::string& work) {
    bool ok;
    std::vector<std::string> lines = read_text_lines(work + "/classes.ref", &ok);
    if (!ok || lines.empty()) { report(false, "unicode_classes: cannot read " + work + "/classes.ref"); return; }
    std::vector<uint8_t> ref(0x110000, UCLASS_OTHER);
    for (size_t i = 1; i < lines.size(); i++) {
        unsigned lo, hi, k;
        if (sscanf(lines[i].c_str(), "%u %u %u", &lo, &hi, &k) != 3 || hi >= 0x110000) { ok = false; break; }
        for (unsigned c = lo; c <= hi; c++) { ref[c] = (uint8_t)k; }
    }
    long bad = 0;
    uint32_t first_bad = 0;
    for (uint32_t c = 0; ok && c < 0x110000; c++) {
        if (unicode_class(c) != ref[c]) { if (!bad++) { first_bad = c; } }
    }
    char msg[512];
    snprintf(msg, sizeof(msg), "unicode_classes: %ld of 1114112 code points differ from %s (tables: %s)%s",
             bad, lines[0].c_str() + 2, UNICODE_TABLES_SOURCE, ok ? "" : " [unparsable classes.ref]");
    if (bad) { snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), ", first U+%04X", first_bad); }
    report(ok && bad == 0, msg);
}

// whole-file comparison; also checks the round trip
static void check_file(GPT2Encoder& enc, const std::string& name, const std::string& path, const std::string& ref_path, bool special) {
    std::string text;
    std::vector<std::vector<int>> ref;
    if (!read_all(path, &text) || !read_id_lines(ref_path, &ref) || ref.size() != 1) {
        report(false, name + ": cannot read " + path + " or " + ref_path);
        return;
    }
    std::vector<int> ids = special ? enc.encode(text) : enc.encode_ordinary(text);
    size_t first = 0;
    while (first < ids.size() && first < ref[0].size() && ids[first] == ref[0][first]) { first++; }
    bool same = ids == ref[0];
    char msg[512];
    if (same) {
        snprintf(msg, sizeof(msg), "%s: %zu ids identical to js-tiktoken (%zu bytes, %s)", name.c_str(), ids.size(),
                 text.size(), special ? "<|endoftext|> special" : "ordinary");
    } else {
        snprintf(msg, sizeof(msg), "%s: ids differ from js-tiktoken (ours %zu, reference %zu), first difference at id %zu",
                 name.c_str(), ids.size(), ref[0].size(), first);
    }
    report(same, msg);
    bool rt = enc.decode(ids) == text;
    report(rt, name + ": decode(encode(text)) " + (rt ? "==" : "!=") + " text (" + std::to_string(text.size()) + " bytes)");
}

static void check_strings(GPT2Encoder& enc, const std::string& name, const std::vector<std::string>& strs,
                          const std::string& ref_path, bool special) {
    std::vector<std::vector<int>> ref;
    if (!read_id_lines(ref_path, &ref) || ref.size() != strs.size()) {
        report(false, name + ": cannot read " + ref_path + " or its line count (" + std::to_string(ref.size()) +
                      ") != " + std::to_string(strs.size()) + " strings");
        return;
    }
    int bad = 0, bad_rt = 0;
    size_t n_ids = 0;
    for (size_t i = 0; i < strs.size(); i++) {
        std::vector<int> ids = special ? enc.encode(strs[i]) : enc.encode_ordinary(strs[i]);
        n_ids += ids.size();
        if (ids != ref[i]) {
            if (bad++ < 3) {
                fprintf(stderr, "  %s mismatch #%zu: \"%s\"\n    ours: %s\n    ref:  %s\n", name.c_str(), i,
                        escaped(strs[i]).c_str(), ids_str(ids).c_str(), ids_str(ref[i]).c_str());
            }
        }
        if (enc.decode(ids) != strs[i]) { bad_rt++; }
    }
    char msg[512];
    snprintf(msg, sizeof(msg), "%s: %zu of %zu strings (%zu ids) identical to js-tiktoken (%s)", name.c_str(),
             strs.size() - bad, strs.size(), n_ids, special ? "<|endoftext|> special" : "ordinary");
    report(bad == 0, msg);
    snprintf(msg, sizeof(msg), "%s: decode(encode(s)) == s for %zu of %zu strings", name.c_str(), strs.size() - bad_rt, strs.size());
    report(bad_rt == 0, msg);
}

static void check_special(GPT2Encoder& enc) {
    std::vector<int> a = enc.encode(std::string("<|endoftext|>"));
    std::vector<int> b = enc.encode_ordinary(std::string("<|endoftext|>"));
    std::vector<int> c = enc.encode(std::string("a<|endoftext|>b<|endoftext|>"));
    bool ok = a.size() == 1 && a[0] == 50256 && enc.eot_token() == 50256 && b.size() > 1 &&
              std::find(b.begin(), b.end(), 50256) == b.end() && enc.decode(b) == "<|endoftext|>" &&
              c.size() == 4 && c[1] == 50256 && c[3] == 50256 && enc.decode(c) == "a<|endoftext|>b<|endoftext|>";
    report(ok, "special_token: encode(\"<|endoftext|>\") = [" + ids_str(a) + "], encode_ordinary = [" + ids_str(b) +
                   "], encode(\"a<|endoftext|>b<|endoftext|>\") = [" + ids_str(c) + "]");
}

static void check_invalid(GPT2Encoder& enc, const std::vector<std::string>& strs, const std::string& work) {
    int n_invalid = 0, bad_rt = 0, bad_pieces = 0, bad_ids = 0;
    bool ok_pieces, ok_ids;
    std::vector<std::string> ref_pieces = read_text_lines(work + "/invalid_pieces.ref", &ok_pieces);
    std::vector<std::vector<int>> ref_ids;
    ok_ids = read_id_lines(work + "/invalid_ordinary.ref", &ref_ids);
    ok_pieces = ok_pieces && ref_pieces.size() == strs.size();
    ok_ids = ok_ids && ref_ids.size() == strs.size();
    for (size_t i = 0; i < strs.size(); i++) {
        const std::string& s = strs[i];
        if (!is_valid_utf8(s)) { n_invalid++; }
        if (enc.decode(enc.encode_ordinary(s)) != s || enc.decode(enc.encode(s)) != s) { bad_rt++; }
        // our pieces, each with U+FFFD substituted, must be node's pieces of the decoded string
        std::string pieces;
        const uint8_t* p = (const uint8_t*)s.data();
        for (size_t k = 0; k < s.size();) {
            size_t e = GPT2Encoder::next_piece(p, s.size(), k);
            std::string piece = whatwg_replace(s.substr(k, e - k));
            if (k) { pieces.push_back(' '); }
            char hx[3];
            for (unsigned char ch : piece) { snprintf(hx, sizeof(hx), "%02x", ch); pieces += hx; }
            k = e;
        }
        if (ok_pieces && pieces != ref_pieces[i]) {
            if (bad_pieces++ < 3) {
                fprintf(stderr, "  invalid_utf8 pieces mismatch #%zu: \"%s\"\n    ours: %s\n    ref:  %s\n", i,
                        escaped(s).c_str(), pieces.substr(0, 200).c_str(), ref_pieces[i].substr(0, 200).c_str());
            }
        }
        if (ok_ids && enc.encode_ordinary(whatwg_replace(s)) != ref_ids[i]) { bad_ids++; }
    }
    char msg[512];
    snprintf(msg, sizeof(msg), "invalid_utf8: decode(encode(s)) == s byte for byte for %zu of %zu strings (%d hold invalid UTF-8)",
             strs.size() - bad_rt, strs.size(), n_invalid);
    report(bad_rt == 0 && n_invalid == (int)strs.size(), msg);
    snprintf(msg, sizeof(msg), "invalid_utf8: pieces equal js-tiktoken's on the U+FFFD-decoded string for %zu of %zu strings%s",
             strs.size() - bad_pieces, strs.size(), ok_pieces ? "" : " [cannot read invalid_pieces.ref]");
    report(ok_pieces && bad_pieces == 0, msg);
    snprintf(msg, sizeof(msg), "invalid_utf8: encode(U+FFFD-replaced s) == js-tiktoken ids for %zu of %zu strings%s",
             strs.size() - bad_ids, strs.size(), ok_ids ? "" : " [cannot read invalid_ordinary.ref]");
    report(ok_ids && bad_ids == 0, msg);
}

// gpt2_tokenizer.bin written from encoder.json, read back by the trainers' tokenizer_init
static void check_llmc_bin(GPT2Encoder& enc, const std::string& vocab_dir, const std::string& work, const std::string& austen) {
    std::string bin = work + "/gpt2_tokenizer.bin", err;
    bool wrote = enc.write_llmc(bin.c_str(), &err);
    Tokenizer t;
    tokenizer_init(&t, bin.c_str());
    int bad = 0;
    for (unsigned i = 0; wrote && t.init_ok && i < t.vocab_size && i < enc.vocab_size(); i++) {
        const std::string& b = enc.token_bytes((int)i);
        const char* d = tokenizer_decode(&t, i);
        if (d == NULL || memcmp(d, b.data(), b.size()) != 0 || d[b.size()] != '\0') { bad++; }
    }
    char msg[512];
    snprintf(msg, sizeof(msg), "llmc_bin: wrote %s (v2), tokenizer_init: init_ok=%d vocab_size=%u eot_token=%d, %d of %zu tokens differ from encoder.json",
             bin.c_str(), t.init_ok, t.vocab_size, t.eot_token, bad, enc.vocab_size());
    report(wrote && t.init_ok && t.vocab_size == 50257 && t.eot_token == 50256 && bad == 0, wrote ? msg : ("llmc_bin: " + err).c_str());

    // decoding the Austen ids token by token, as a trainer prints samples
    std::string text, dec;
    if (read_all(austen, &text)) {
        std::vector<int> ids = enc.encode_ordinary(text);
        for (int id : ids) { const char* d = tokenizer_decode(&t, (unsigned)id); if (d) { dec += d; } }
        report(t.init_ok && dec == text, "llmc_bin: tokenizer_decode of the " + std::to_string(ids.size()) +
                                             " Austen ids " + (dec == text ? "==" : "!=") + " the text");
        // the bin alone is enough to encode (tiktoken's rule needs only the token bytes)
        GPT2Encoder enc2;
        bool loaded = enc2.load_llmc(bin.c_str(), &err);
        bool same = loaded && enc2.encode_ordinary(text) == ids && enc2.encode(std::string("x<|endoftext|>")).back() == 50256;
        report(same, loaded ? "llmc_bin: GPT2Encoder::load_llmc encodes the Austen corpus to the same ids"
                            : "llmc_bin: load_llmc failed: " + err);
    } else {
        report(false, "llmc_bin: cannot read " + austen + " to decode and re-encode it");
    }
    report(tokenizer_decode(&t, 50257) == NULL, "llmc_bin: tokenizer_decode(50257) is NULL (out of range)");
    tokenizer_free(&t);

    // version 1 header (eot implied), missing, corrupt and truncated files
    std::string data;
    read_all(bin, &data);
    std::string v1 = data;
    uint32_t one = 1, zero = 0;
    memcpy(&v1[4], &one, 4);
    memcpy(&v1[12], &zero, 4);
    write_all(work + "/v1.bin", v1);
    tokenizer_init(&t, (work + "/v1.bin").c_str());
    bool v1_ok = t.init_ok && t.eot_token == 50256 && t.vocab_size == 50257;
    tokenizer_free(&t);
    write_all(work + "/truncated.bin", data.substr(0, data.size() / 2));
    std::string bad_magic = data;
    bad_magic[0] ^= 1;
    write_all(work + "/bad_magic.bin", bad_magic);
    int rejected = 0;
    for (const char* f : {"/missing.bin", "/truncated.bin", "/bad_magic.bin"}) {
        fprintf(stderr, "  (expected warning follows)\n");
        tokenizer_init(&t, (work + f).c_str());
        rejected += !t.init_ok && tokenizer_decode(&t, 0) == NULL;
        tokenizer_free(&t);
    }
    report(v1_ok && rejected == 3, "llmc_bin: version 1 header reads with eot 50256; missing, truncated and bad-magic files give init_ok=0 (" +
                                       std::to_string(rejected) + "/3)");

    // the gpt2_tokenizer.bin made by the data scripts must be the same file
    std::string theirs;
    if (read_all(vocab_dir + "/gpt2_tokenizer.bin", &theirs)) {
        report(theirs == data, "llmc_bin: " + vocab_dir + "/gpt2_tokenizer.bin " + (theirs == data ? "==" : "!=") +
                                   " the file written from encoder.json (" + std::to_string(theirs.size()) + " bytes)");
    } else {
        report(false, "llmc_bin: cannot read " + vocab_dir + "/gpt2_tokenizer.bin to compare (HINT: bash dev/data/fetch_gpt2_vocab.sh makes it)");
    }
}

static void check_load_errors(const std::string& vocab_dir, const std::string& work) {
    GPT2Encoder enc;
    std::string err1, err2, err3, json, bpe;
    bool a = enc.load_openai((work + "/no_such_encoder.json").c_str(), (vocab_dir + "/vocab.bpe").c_str(), &err1);
    write_all(work + "/broken.json", "{\"a\": 0, \"b\": }");
    bool b = enc.load_openai((work + "/broken.json").c_str(), (vocab_dir + "/vocab.bpe").c_str(), &err2);
    // vocab.bpe with two merges swapped: no longer consistent with encoder.json
    read_all(vocab_dir + "/vocab.bpe", &bpe);
    size_t l1 = bpe.find('\n') + 1, l2 = bpe.find('\n', l1) + 1, l3 = bpe.find('\n', l2) + 1;
    std::string swapped = bpe.substr(0, l1) + bpe.substr(l2, l3 - l2) + bpe.substr(l1, l2 - l1) + bpe.substr(l3);
    write_all(work + "/swapped.bpe", swapped);
    bool c = enc.load_openai((vocab_dir + "/encoder.json").c_str(), (work + "/swapped.bpe").c_str(), &err3);
    fprintf(stderr, "  load errors: %s\n  %s\n  %s\n", err1.c_str(), err2.c_str(), err3.c_str());
    report(!a && !b && !c && err1.find("no_such_encoder.json") != std::string::npos &&
               err2.find("broken.json") != std::string::npos && err3.find("swapped.bpe line 2") != std::string::npos,
           "load_errors: missing encoder.json, malformed JSON and a vocab.bpe out of order are rejected with a message naming the file");
}

static int cmd_check(const std::string& vocab_dir, const std::string& work, const std::string& austen, const std::string& torture) {
    GPT2Encoder enc;
    std::string err;
    auto t0 = std::chrono::steady_clock::now();
    bool loaded = enc.load_openai((vocab_dir + "/encoder.json").c_str(), (vocab_dir + "/vocab.bpe").c_str(), &err);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!loaded) {
        report(false, "load: " + err);
        printf("%d passed, %d failed\n", g_pass, g_fail);
        return 1;
    }
    char msg[256];
    snprintf(msg, sizeof(msg), "load: %zu tokens from encoder.json, %zu merges of vocab.bpe consistent with it, eot %d (%.2fs)",
             enc.vocab_size(), enc.vocab_size() - 257, enc.eot_token(), dt);
    report(enc.vocab_size() == 50257 && enc.eot_token() == 50256, msg);

    check_classes(work);
    check_file(enc, "austen", austen, work + "/austen.ref", false);
    check_file(enc, "torture", torture, work + "/torture_ordinary.ref", false);
    check_file(enc, "torture_special", torture, work + "/torture_special.ref", true);
    check_special(enc);
    std::vector<std::string> fuzz, invalid, longp;
    if (!read_records(work + "/fuzz.bin", &fuzz) || !read_records(work + "/invalid.bin", &invalid) ||
        !read_records(work + "/long.bin", &longp)) {
        report(false, "fuzz: cannot read " + work + "/fuzz.bin, invalid.bin or long.bin");
    } else {
        int n_valid = 0;
        for (auto& s : fuzz) { n_valid += is_valid_utf8(s); }
        report(n_valid == (int)fuzz.size(), "fuzz: " + std::to_string(n_valid) + " of " + std::to_string(fuzz.size()) + " generated strings are valid UTF-8");
        check_strings(enc, "fuzz", fuzz, work + "/fuzz_ordinary.ref", false);
        check_strings(enc, "fuzz_special", fuzz, work + "/fuzz_special.ref", true);
        check_strings(enc, "long_pieces", longp, work + "/long_ordinary.ref", false);
        check_invalid(enc, invalid, work);
    }
    check_llmc_bin(enc, vocab_dir, work, austen);
    check_load_errors(vocab_dir, work);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}

int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "gen") == 0) { return cmd_gen(argv[2]); }
    if (argc == 6 && strcmp(argv[1], "check") == 0) { return cmd_check(argv[2], argv[3], argv[4], argv[5]); }
    fprintf(stderr, "usage: %s gen WORK | check VOCAB_DIR WORK AUSTEN TORTURE  (run by dev/test/test_tokenizer.sh)\n", argv[0]);
    return 2;
}
