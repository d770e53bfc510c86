/*
fuzz_common.h: what every libFuzzer harness of dev/fuzz/ shares. The parsers take file paths, so
each input is written to a file in a directory of this process's own (mkdtemp under $TMPDIR or
/tmp, removed at exit), and the properties every refusal must have are checked here: a one-line,
non-empty message.
*/
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

static char fuzz_dir_path[4096];

static void fuzz_dir_remove(void) {
    if (fuzz_dir_path[0] == '\0') { return; }
    // the harnesses write only these names
    const char* names[] = {"input.bin", "shard_000.bin", "shard_001.bin", "encoder.json", "vocab.bpe"};
    for (const char* n : names) { unlink((std::string(fuzz_dir_path) + "/" + n).c_str()); }
    rmdir(fuzz_dir_path);
}

// this process's scratch directory, created on first use
static const char* fuzz_dir(void) {
    if (fuzz_dir_path[0] == '\0') {
        const char* tmp = getenv("TMPDIR");
        snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "%s/llmfuzz.XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
        if (mkdtemp(fuzz_dir_path) == NULL) {
            fprintf(stderr, "fuzz: cannot create a scratch directory %s\n", fuzz_dir_path);
            abort();
        }
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

// writes data to <scratch>/name (replacing it) and returns the path; a harness bug, not a finding,
// if that fails, so it aborts with a message
static std::string fuzz_write(const char* name, const uint8_t* data, size_t size) {
    std::string path = std::string(fuzz_dir()) + "/" + name;
    FILE* f = fopen(path.c_str(), "wb");
    if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
        abort();
    }
    return path;
}

// a property of the code under test does not hold: report it and abort, which libFuzzer reports as
// a crash and saves the input. The report goes through the sanitizers' report file, which is still
// open when -close_fd_mask=3 has closed stderr (dev/test/test_fuzz.sh runs with it).
#define FUZZ_CHECK(cond, ...) do { if (!(cond)) { char fuzz_what_[1024]; \
        int fuzz_n_ = snprintf(fuzz_what_, sizeof(fuzz_what_), "fuzz property failed: %s: ", #cond); \
        snprintf(fuzz_what_ + fuzz_n_, sizeof(fuzz_what_) - (size_t)fuzz_n_, __VA_ARGS__); \
        for (char* p_ = fuzz_what_; *p_; p_++) { if (*p_ == '\n') { *p_ = ' '; } } \
        __sanitizer_report_error_summary(fuzz_what_); abort(); } } while (0)

// every refusal is one non-empty line
static void fuzz_check_message(const char* msg) {
    FUZZ_CHECK(msg[0] != '\0', "empty error message");
    FUZZ_CHECK(strchr(msg, '\n') == NULL, "error message of more than one line: %s", msg);
}

static uint64_t fuzz_le64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) { v = (v << 8) | p[i]; }
    return v;
}

#endif // FUZZ_COMMON_H
