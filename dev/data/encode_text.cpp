/*
encode_text: text files -> llm.c token shards (the format read by dataloader.h).

  dev/data/encode_text -o dev/data/austen/austen --val-fraction 0.05 novel1.txt novel2.txt ...
  dev/data/encode_text --print-ids file.txt

Each input file holds one or more documents separated by the text "<|endoftext|>". In the shards,
every document is preceded by the <|endoftext|> token (50256), as llm.c's data scripts do, so the
model sees a document boundary before each document. Shards are PREFIX_train_NNNNNN.bin and
PREFIX_val_NNNNNN.bin, each at most --shard-size tokens (a document may continue in the next shard).
The validation split is either the last fraction of every document (cut at a line boundary, else
a sentence end or a space, so every document is represented in both splits) or the documents of --val-file.

Re-running with the same -o replaces the dataset as a whole or not at all: every input is checked
before anything is written, new shards are written as PREFIX_<split>_NNNNNN.bin.tmp (a name the
trainers' globs PREFIX_train_*.bin do not match), and only when all inputs are encoded and both
splits are non-empty are they fsync'ed, renamed over the old shards, and the old shards the new
dataset does not have removed. Any error or Ctrl-C before that removes the .tmp files and leaves
the old dataset byte-identical. The one window: a crash (SIGKILL, power loss) between the first
and the last rename leaves some new and some old shards. It lasts a few renames of one directory
(microseconds, no data written), Ctrl-C or SIGTERM wait until it is over, and
rerunning the same command repairs it; an atomic swap would need a directory per dataset
(a symlink to flip), which changes the PREFIX layout that every script and trainer uses.

Outputs never replace inputs. Before reading anything, every file the run reads (each FILE, each
--val-file, --encoder and --vocab or --tokenizer, standard input when it is a redirected file) is
compared by device and inode, so symlinks, hard links and "./x" vs "x" are caught, with every
file the run may write, rename over or remove: --write-decoder PATH and PATH.tmp, or each
PREFIX_{train,val}_NNNNNN.bin[.tmp] already in PREFIX's folder. A match is refused in one line
naming both. The folder's existing names are enough: an input exists, so an input that a shard
name would replace (a text file called PREFIX_train_000000.bin) is among them. Every .tmp is a
new file even where a link was left at its name, so no write goes through a link to elsewhere
(--write-decoder too: PATH.tmp, then a rename over PATH).
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "../../tokenizer.h"
#include "../../dataloader.h"

static const char* kDefaultEncoder = "dev/data/gpt2/encoder.json";
static const char* kDefaultVocab = "dev/data/gpt2/vocab.bpe";

static void usage(FILE* f) {
    fprintf(f,
        "usage: dev/data/encode_text [options] FILE...\n"
        "Turns text files into llm.c token shards (GPT-2 BPE, uint16 tokens, dataloader.h's format).\n"
        "Each FILE (\"-\" is standard input) holds documents separated by the text <|endoftext|>;\n"
        "in the shards every document starts with the <|endoftext|> token.\n"
        "\n"
        "  -o PREFIX            write PREFIX_train_000000.bin, ... and PREFIX_val_000000.bin, ...;\n"
        "                       an earlier dataset there is replaced whole, and only on success\n"
        "  --val-fraction F     the last fraction F (0 <= F < 1) of every document, cut at a line\n"
        "                       boundary (else a sentence end or a space), goes to the validation\n"
        "                       split (default 0: no validation shards)\n"
        "  --val-file FILE      the documents of FILE are the validation split (repeatable);\n"
        "                       excludes --val-fraction\n"
        "  --shard-size N       tokens per shard (default 100000000)\n"
        "  --print-ids          print the token ids of each FILE as space-separated integers, one line\n"
        "                       per file (the text <|endoftext|> is the token 50256; nothing is added)\n"
        "  --encoder PATH       GPT-2 encoder.json (default %s)\n"
        "  --vocab PATH         GPT-2 vocab.bpe (default %s)\n"
        "  --tokenizer PATH     load llm.c's gpt2_tokenizer.bin instead of encoder.json + vocab.bpe\n"
        "  --write-decoder PATH write llm.c's gpt2_tokenizer.bin (for the trainers' sampling) and exit\n"
        "  -q                   no summary lines\n"
        "  -h, --help           this help\n",
        kDefaultEncoder, kDefaultVocab);
}

// shards written so far under their .tmp names: removed by DIE, so a failed run leaves nothing behind
static std::vector<std::string> g_tmp_files;
static void remove_tmp_files() {
    for (const std::string& t : g_tmp_files) { remove(t.c_str()); }
    g_tmp_files.clear();
}

// one-line error and exit: names the file or flag and what was expected
#define DIE(...) do { remove_tmp_files(); fprintf(stderr, "encode_text: "); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)

// Ctrl-C / SIGTERM / SIGHUP only set a flag: the encoding loop then stops through DIE (which removes
// the .tmp files), and the renames of the commit, once begun, are not cut short
static volatile sig_atomic_t g_signal = 0;
static void on_signal(int sig) { g_signal = sig; }
static void install_signal_handlers() {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a read of a stalled stdin returns EINTR instead of blocking on
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int sig : sigs) {
        struct sigaction old;
        // a signal the parent ignores (nohup, a background job's SIGINT) stays ignored
        if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN) { sigaction(sig, &sa, NULL); }
    }
}
static void check_signal(const char* prefix) {
    if (g_signal) { DIE("interrupted by signal %d: %s_* left as it was", (int)g_signal, prefix); }
}

// before anything is written: every input exists, is a file (not a directory) and opens for reading
static void check_input(const char* path) {
    if (strcmp(path, "-") == 0) { return; }
    FILE* f = fopen(path, "rb");
    if (f == NULL) { DIE("cannot read '%s': %s (expected a text file)", path, strerror(errno)); }
    struct stat st;
    bool dir = fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode);
    fclose(f);
    if (dir) { DIE("'%s' is a directory (expected a text file)", path); }
}

static std::string read_input(const char* path) {
    FILE* f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) { DIE("cannot read '%s': %s (expected a text file)", path, strerror(errno)); }
    if (f != stdin) {
        struct stat st;
        if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) { DIE("'%s' is a directory (expected a text file)", path); }
    }
    std::string s;
    if (!read_all_bytes(f, &s)) {
        if (g_signal) { if (f != stdin) { fclose(f); } return s; }  // the caller's check_signal says why
        DIE("error reading '%s': %s", path, strerror(errno));
    }
    if (f != stdin) { fclose(f); }
    return s;
}

static std::vector<std::string> split_documents(const std::string& text) {
    std::vector<std::string> docs;
    const std::string sep = TOKENIZER_EOT_TEXT;
    size_t start = 0;
    while (true) {
        size_t pos = text.find(sep, start);
        std::string doc = text.substr(start, pos == std::string::npos ? std::string::npos : pos - start);
        // the newlines around a separator belong to neither document
        size_t b = doc.find_first_not_of(" \t\r\n");
        size_t e = doc.find_last_not_of(" \t\r\n");
        if (b != std::string::npos) { docs.push_back(doc.substr(b, e - b + 1)); }
        if (pos == std::string::npos) { break; }
        start = pos + sep.size();
    }
    return docs;
}

// writes PREFIX_<split>_NNNNNN.bin.tmp shards of at most shard_size tokens; commit_shards renames them
struct ShardWriter {
    std::string prefix, split;
    size_t shard_size;
    std::vector<uint16_t> buf;
    int shards = 0;
    size_t tokens = 0;

    ShardWriter(const std::string& p, const std::string& s, size_t n) : prefix(p), split(s), shard_size(n) {}
    std::string name(int i) const {
        char num[16];
        snprintf(num, sizeof(num), "%06d", i);
        return prefix + "_" + split + "_" + num + ".bin";
    }
    void add(const std::vector<int>& ids) {
        for (int id : ids) {
            if (id < 0 || id > 65535) { DIE("token id %d does not fit the uint16 shard format (expected a vocabulary of at most 65536 tokens)", id); }
            buf.push_back((uint16_t)id);
            if (buf.size() == shard_size) { flush(); }
        }
    }
    void flush() {
        if (buf.empty()) { return; }
        std::string path = name(shards);
        std::string tmp = path + ".tmp";
        // a fresh file, never through a link a killed run or a user left at the .tmp name: fopen's
        // "wb" would truncate whatever file that link points to
        unlink(tmp.c_str());
        int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd >= 0) { g_tmp_files.push_back(tmp); }
        FILE* f = fd < 0 ? NULL : fdopen(fd, "wb");
        if (f == NULL) { DIE("cannot write '%s': %s (expected a writable directory for -o)", tmp.c_str(), strerror(errno)); }
        int32_t header[DATALOADER_HEADER_INTS];
        memset(header, 0, sizeof(header));
        header[0] = DATALOADER_MAGIC;
        header[1] = DATALOADER_VERSION;
        header[2] = (int32_t)buf.size();
        bool ok = fwrite(header, sizeof(int32_t), DATALOADER_HEADER_INTS, f) == DATALOADER_HEADER_INTS &&
                  fwrite(buf.data(), sizeof(uint16_t), buf.size(), f) == buf.size();
        if (fclose(f) != 0 || !ok) { DIE("failed writing '%s': %s (disk full?)", tmp.c_str(), strerror(errno)); }
        tokens += buf.size();
        shards++;
        buf.clear();
    }
};

static void fsync_path(const std::string& path, int flags) {
    int fd = open(path.c_str(), flags);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) { close(fd); }
        DIE("cannot fsync '%s': %s (expected a writable local file system for -o)", path.c_str(), strerror(e));
    }
    close(fd);
}

// the directory and file-name start of -o PREFIX: "a/b/c" -> "a/b", "c"
static void split_prefix(const std::string& prefix, std::string* dir, std::string* base) {
    size_t slash = prefix.rfind('/');
    *dir = slash == std::string::npos ? "." : slash == 0 ? "/" : prefix.substr(0, slash);
    *base = slash == std::string::npos ? prefix : prefix.substr(slash + 1);
}

// the shard number of NAME if it is BASE_<split>_<digits><ext>, else -1
static long shard_index(const char* name, const std::string& base, const char* split, const char* ext = ".bin") {
    std::string head = base + "_" + split + "_";
    if (strncmp(name, head.c_str(), head.size()) != 0) { return -1; }
    const char* p = name + head.size();
    const char* q = p;
    while (*q >= '0' && *q <= '9') { q++; }
    if (q - p < 6 || q - p > 9 || strcmp(q, ext) != 0) { return -1; }
    return strtol(p, NULL, 10);
}

// the new dataset goes live: all .tmp shards to disk, renamed over the old ones, then the old
// shards numbered past the new ones (which a glob would still pick up) removed, with any .tmp
// shards an earlier run killed by SIGKILL left behind. Returns how many old shards were removed.
static int commit_shards(const std::string& prefix, const ShardWriter& train, const ShardWriter& val) {
    for (const std::string& t : g_tmp_files) { fsync_path(t, O_RDONLY); }
    check_signal(prefix.c_str());  // the last moment a Ctrl-C still leaves the old dataset whole
    std::string dir, base;
    split_prefix(prefix, &dir, &base);
    // the renames run to the end even if a signal arrives now (on_signal only sets a flag)
    for (size_t i = 0; i < g_tmp_files.size(); i++) {
        std::string t = g_tmp_files[i];
        std::string path = t.substr(0, t.size() - 4);
        if (rename(t.c_str(), path.c_str()) != 0) {
            int e = errno;
            g_tmp_files.erase(g_tmp_files.begin(), g_tmp_files.begin() + i);
            DIE("cannot rename '%s' to '%s': %s; %s_* now mixes %zu new shards with old ones (HINT: run the same command again)",
                t.c_str(), path.c_str(), strerror(e), prefix.c_str(), i);
        }
    }
    g_tmp_files.clear();
    fsync_path(dir, O_RDONLY | O_DIRECTORY);
    std::vector<std::string> stale;
    DIR* d = opendir(dir.c_str());
    if (d == NULL) { DIE("cannot list '%s' to remove the old shards: %s", dir.c_str(), strerror(errno)); }
    for (struct dirent* e; (e = readdir(d)) != NULL;) {
        long ti = shard_index(e->d_name, base, "train"), vi = shard_index(e->d_name, base, "val");
        if ((ti >= 0 && ti >= train.shards) || (vi >= 0 && vi >= val.shards)) { stale.push_back(dir + "/" + e->d_name); }
        else if (shard_index(e->d_name, base, "train", ".bin.tmp") >= 0 || shard_index(e->d_name, base, "val", ".bin.tmp") >= 0) {
            remove((dir + "/" + e->d_name).c_str());
        }
    }
    closedir(d);
    for (const std::string& s : stale) {
        if (remove(s.c_str()) != 0) { DIE("cannot remove the old shard '%s': %s (expected a writable directory for -o)", s.c_str(), strerror(errno)); }
    }
    if (!stale.empty()) { fsync_path(dir, O_RDONLY | O_DIRECTORY); }
    return (int)stale.size();
}

static void make_parent_dir(const std::string& prefix) {
    size_t slash = prefix.rfind('/');
    if (slash == std::string::npos || slash == 0) { return; }
    std::string dir = prefix.substr(0, slash);
    for (size_t i = 1; i <= dir.size(); i++) {
        if (i == dir.size() || dir[i] == '/') {
            std::string part = dir.substr(0, i);
            if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
                DIE("cannot create the directory '%s' for -o %s: %s", part.c_str(), prefix.c_str(), strerror(errno));
            }
        }
    }
}

// A file encode_text reads, and the flag that named it. Outputs are compared with inputs by
// (st_dev, st_ino), not by name, so a symlink, a hard link, "./x" vs "x" or a second path through
// a symlinked folder all count as the same file.
struct InputFile {
    std::string what;  // "--encoder 'V/encoder.json'", "the input 'a.txt'", "standard input"
    struct stat st;
};

static void add_input(std::vector<InputFile>* in, const char* flag, const char* path) {
    InputFile f;
    if (strcmp(path, "-") == 0) {
        // stdin redirected from a file (`- < D/d_train_000000.bin`) is that file; a pipe or a
        // terminal cannot be an output
        if (fstat(0, &f.st) != 0 || !S_ISREG(f.st.st_mode)) { return; }
        f.what = "standard input";
    } else {
        // one that does not exist is no output's twin; reading it reports it later, still before any write
        if (stat(path, &f.st) != 0) { return; }
        f.what = std::string(flag) + " '" + path + "'";
    }
    in->push_back(f);
}

static const InputFile* same_file(const std::vector<InputFile>& in, const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) { return NULL; }  // not there yet: a new file, no input's
    for (const InputFile& f : in) {
        if (f.st.st_dev == st.st_dev && f.st.st_ino == st.st_ino) { return &f; }
    }
    return NULL;
}

// NAME is BASE_train_ or BASE_val_, then 6 or more digits, then .bin or .bin.tmp: every name a run
// with -o DIR/BASE may write, rename over or remove (a superset of shard_index's, on purpose)
static bool shard_like(const char* name, const std::string& base) {
    for (const char* split : {"_train_", "_val_"}) {
        std::string head = base + split;
        if (strncmp(name, head.c_str(), head.size()) != 0) { continue; }
        const char* q = name + head.size();
        const char* p = q;
        while (*q >= '0' && *q <= '9') { q++; }
        if (q - p >= 6 && (strcmp(q, ".bin") == 0 || strcmp(q, ".bin.tmp") == 0)) { return true; }
    }
    return false;
}

// Refuses, before any input is read, an output that is one of the inputs: --write-decoder over
// the vocabulary it is built from, or a shard name of -o PREFIX that is an input text (whose
// rename at commit would replace it). Only files that exist can be an input, so for -o it is
// enough to look at the shard-like names already in PREFIX's folder.
static void refuse_outputs_over_inputs(const std::vector<InputFile>& in, const char* write_decoder, const char* prefix) {
    if (in.empty()) { return; }
    if (write_decoder != NULL) {
        const char* hint = "HINT: write the decoder to another path, e.g. dev/data/gpt2/gpt2_tokenizer.bin";
        if (const InputFile* f = same_file(in, write_decoder)) {
            DIE("--write-decoder '%s' is the same file as %s: writing it would destroy the input (%s)", write_decoder, f->what.c_str(), hint);
        }
        // write_llmc writes PATH.tmp, then renames it to PATH
        std::string tmp = std::string(write_decoder) + ".tmp";
        if (const InputFile* f = same_file(in, tmp)) {
            DIE("--write-decoder '%s' writes '%s' first, which is the same file as %s: writing it would destroy the input (%s)",
                write_decoder, tmp.c_str(), f->what.c_str(), hint);
        }
        return;
    }
    if (prefix == NULL) { return; }
    std::string dir, base;
    split_prefix(prefix, &dir, &base);
    DIR* d = opendir(dir.c_str());
    if (d == NULL) {
        if (errno == ENOENT || errno == ENOTDIR) { return; }  // no folder, no files in it (a later check says why it cannot be written)
        DIE("cannot list '%s' for -o %s: %s (expected a readable directory: its old shards are replaced)", dir.c_str(), prefix, strerror(errno));
    }
    std::string clash, with;
    for (struct dirent* e; clash.empty() && (e = readdir(d)) != NULL;) {
        if (!shard_like(e->d_name, base)) { continue; }
        std::string path = dir + "/" + e->d_name;
        if (const InputFile* f = same_file(in, path)) { clash = path; with = f->what; }
    }
    closedir(d);
    if (!clash.empty()) {
        DIE("-o %s writes, replaces or removes '%s', which is the same file as %s: writing it would destroy the input (HINT: choose another -o, or give the input a name outside the dataset's PREFIX_train_* and PREFIX_val_*)",
            prefix, clash.c_str(), with.c_str());
    }
}

static double parse_fraction(const char* flag, const char* s) {
    char* end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0.0 && v < 1.0)) {
        DIE("%s expects a number in [0, 1), got '%s'", flag, s);
    }
    return v;
}

// the default vocabulary next to the binary (dev/data/gpt2/), so encode_text runs from any directory
static std::string default_path(const char* rel_to_repo, const char* name) {
    struct stat st;
    if (stat(rel_to_repo, &st) == 0) { return rel_to_repo; }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) { return rel_to_repo; }
    exe[n] = '\0';
    std::string dir(exe);
    dir = dir.substr(0, dir.rfind('/'));
    std::string p = dir + "/gpt2/" + name;
    return stat(p.c_str(), &st) == 0 ? p : std::string(rel_to_repo);
}

int main(int argc, char** argv) {
    const char* prefix = NULL;
    const char* encoder_path = kDefaultEncoder;
    const char* vocab_path = kDefaultVocab;
    const char* tokenizer_bin = NULL;
    const char* write_decoder = NULL;
    double val_fraction = 0.0;
    bool have_val_fraction = false;
    std::vector<const char*> val_files, inputs;
    size_t shard_size = 100000000;
    bool print_ids = false, quiet = false;

    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        auto value = [&](const char* flag) -> const char* {
            if (i + 1 >= argc) { DIE("%s expects a value (HINT: encode_text -h)", flag); }
            return argv[++i];
        };
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { usage(stdout); return 0; }
        else if (strcmp(a, "-o") == 0) { prefix = value(a); }
        else if (strcmp(a, "--val-fraction") == 0) { val_fraction = parse_fraction(a, value(a)); have_val_fraction = true; }
        else if (strcmp(a, "--val-file") == 0) { val_files.push_back(value(a)); }
        else if (strcmp(a, "--shard-size") == 0) {
            const char* v = value(a);
            char* end = NULL;
            long long n = strtoll(v, &end, 10);
            if (end == v || *end != '\0' || n < 1 || n > 2147483647LL) {
                DIE("--shard-size expects a token count in 1..2147483647, got '%s'", v);
            }
            shard_size = (size_t)n;
        }
        else if (strcmp(a, "--print-ids") == 0) { print_ids = true; }
        else if (strcmp(a, "--encoder") == 0) { encoder_path = value(a); }
        else if (strcmp(a, "--vocab") == 0) { vocab_path = value(a); }
        else if (strcmp(a, "--tokenizer") == 0) { tokenizer_bin = value(a); }
        else if (strcmp(a, "--write-decoder") == 0) { write_decoder = value(a); }
        else if (strcmp(a, "-q") == 0) { quiet = true; }
        else if (a[0] == '-' && a[1] != '\0') { DIE("unknown flag '%s' (HINT: encode_text -h)", a); }
        else { inputs.push_back(a); }
    }
    if (have_val_fraction && !val_files.empty()) { DIE("--val-fraction and --val-file exclude each other (expected one way to choose the validation split)"); }
    if (!write_decoder && inputs.empty()) { DIE("no input files (expected text files after the flags; HINT: encode_text -h)"); }
    if (!write_decoder && !print_ids && prefix == NULL) { DIE("-o PREFIX is required to write shards (or --print-ids to print ids; HINT: encode_text -h)"); }
    if (prefix != NULL && (prefix[0] == '\0' || prefix[strlen(prefix) - 1] == '/')) {
        DIE("-o '%s': expected a file-name prefix such as dev/data/mine/mine (shards are PREFIX_train_000000.bin, ...)", prefix);
    }
    if (print_ids && (prefix != NULL || !val_files.empty() || have_val_fraction)) {
        DIE("--print-ids prints ids and writes no shards (expected no -o, --val-fraction or --val-file with it)");
    }

    std::string enc_default = default_path(kDefaultEncoder, "encoder.json");
    std::string vocab_default = default_path(kDefaultVocab, "vocab.bpe");
    if (encoder_path == kDefaultEncoder) { encoder_path = enc_default.c_str(); }
    if (vocab_path == kDefaultVocab) { vocab_path = vocab_default.c_str(); }
    // every file this run reads, then no output may be one of them: checked before anything is read
    {
        std::vector<InputFile> in;
        if (tokenizer_bin) { add_input(&in, "--tokenizer", tokenizer_bin); }
        else { add_input(&in, "--encoder", encoder_path); add_input(&in, "--vocab", vocab_path); }
        if (!write_decoder) {
            for (const char* path : inputs) { add_input(&in, "the input", path); }
            for (const char* path : val_files) { add_input(&in, "--val-file", path); }
        }
        refuse_outputs_over_inputs(in, write_decoder, print_ids ? NULL : prefix);
    }
    GPT2Encoder enc;
    std::string err;
    bool loaded = tokenizer_bin ? enc.load_llmc(tokenizer_bin, &err) : enc.load_openai(encoder_path, vocab_path, &err);
    if (!loaded) { DIE("%s%s", err.c_str(), err.find("HINT") == std::string::npos ? " (HINT: bash dev/data/fetch_gpt2_vocab.sh)" : ""); }

    if (write_decoder) {
        // write_llmc opens PATH.tmp with fopen "wb", which would write through a link left there
        unlink((std::string(write_decoder) + ".tmp").c_str());
        if (!enc.write_llmc(write_decoder, &err)) { DIE("%s", err.c_str()); }
        if (!quiet) { printf("encode_text: wrote %s (%zu tokens, eot %d)\n", write_decoder, enc.vocab_size(), enc.eot_token()); }
        return 0;
    }

    if (print_ids) {
        std::vector<int> ids;
        std::string line;
        for (const char* path : inputs) {
            std::string text = read_input(path);
            ids.clear();
            enc.encode(text.data(), text.size(), &ids);
            line.clear();
            for (size_t i = 0; i < ids.size(); i++) {
                if (i) { line.push_back(' '); }
                line += std::to_string(ids[i]);
            }
            line.push_back('\n');
            fwrite(line.data(), 1, line.size(), stdout);
        }
        return 0;
    }

    // everything that can be checked before writing: the inputs, then the output directory
    for (const char* path : inputs) { check_input(path); }
    for (const char* path : val_files) { check_input(path); }
    make_parent_dir(prefix);
    {
        std::string dir, base;
        split_prefix(prefix, &dir, &base);
        if (access(dir.c_str(), W_OK | X_OK) != 0) { DIE("cannot write in '%s' for -o %s: %s (expected a writable directory)", dir.c_str(), prefix, strerror(errno)); }
    }
    install_signal_handlers();
    ShardWriter train(prefix, "train", shard_size), val(prefix, "val", shard_size);
    const bool want_val = val_fraction > 0.0 || !val_files.empty();
    const int eot = enc.eot_token();
    size_t n_docs = 0, n_bytes = 0;
    clock_t t0 = clock();
    std::vector<int> ids;
    auto encode_doc = [&](const char* s, size_t len, ShardWriter* w) {
        check_signal(prefix);
        ids.clear();
        ids.push_back(eot);
        enc.encode_ordinary(s, len, &ids);
        w->add(ids);
        n_bytes += len;
    };
    for (const char* path : inputs) {
        std::string text = read_input(path);
        check_signal(prefix);
        for (const std::string& doc : split_documents(text)) {
            n_docs++;
            if (val_fraction <= 0.0) { encode_doc(doc.data(), doc.size(), &train); continue; }
            // cut at the first line break after (1 - F) of the document, so no line is split;
            // texts with very long lines (one paragraph per line) fall back to a sentence end
            // or a space
            size_t cut = (size_t)((1.0 - val_fraction) * (double)doc.size());
            size_t at = doc.find('\n', cut);
            if (at == std::string::npos) { at = doc.find(". ", cut); if (at != std::string::npos) { at += 1; } }
            if (at == std::string::npos) { at = doc.find(' ', cut); }
            cut = at == std::string::npos ? doc.size() : at;
            size_t vstart = doc.find_first_not_of(" \t\r\n", cut);
            encode_doc(doc.data(), cut, &train);
            if (vstart != std::string::npos) { encode_doc(doc.data() + vstart, doc.size() - vstart, &val); }
        }
    }
    for (const char* path : val_files) {
        std::string text = read_input(path);
        check_signal(prefix);
        for (const std::string& doc : split_documents(text)) { encode_doc(doc.data(), doc.size(), &val); }
    }
    train.flush();
    val.flush();
    check_signal(prefix);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    // refused before the old dataset is touched
    if (train.tokens == 0) { DIE("the inputs hold no text (expected non-empty documents in %s ...; %s_* left as it was)", inputs[0], prefix); }
    if (want_val && val.tokens == 0) { DIE("the validation split is empty (expected some text: a larger --val-fraction or a non-empty --val-file; %s_* left as it was)", prefix); }
    int removed = commit_shards(prefix, train, val);
    if (!quiet) {
        printf("encode_text: %zu documents, %zu bytes in %.1f s (%.1f MB/s)\n", n_docs, n_bytes, secs,
               secs > 0 ? n_bytes / secs / 1e6 : 0.0);
        printf("encode_text: train %zu tokens in %d shard(s) %s_train_*.bin\n", train.tokens, train.shards, prefix);
        if (want_val) { printf("encode_text: val %zu tokens in %d shard(s) %s_val_*.bin\n", val.tokens, val.shards, prefix); }
        if (removed > 0) { printf("encode_text: removed %d shard(s) of the earlier dataset %s_* that the new one does not have\n", removed, prefix); }
    }
    return 0;
}
