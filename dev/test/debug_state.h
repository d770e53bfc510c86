/*
debug_state.h: reads the reference's debug-state file (dev/FORMATS.md, magic 20240327 v3), a list
of named tensors, and measures relative errors against it. Used by the CPU test
(dev/cpu/test_gpt2_cpu.cpp) and the CUDA test (test_gpt2.cu). Plain C++, host only.
*/
#ifndef DEBUG_STATE_H
#define DEBUG_STATE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEBUG_STATE_MAGIC 20240327
#define DEBUG_STATE_VERSION 3

enum { DEBUG_F32 = 0, DEBUG_I32 = 1, DEBUG_F64 = 2 };

typedef struct {
    char name[64];
    int dtype;      // as stored in the file
    int ndim;
    int dims[4];
    size_t numel;
    double* f;      // float data, widened to double (NULL for int32 records)
    int* i;         // int32 data (NULL for float records)
} DebugTensor;

typedef struct {
    int B, T, num_steps;
    int num_tensors;
    DebugTensor* tensors;
} DebugState;

static inline void debug_state_free(DebugState* s) {
    for (int n = 0; n < s->num_tensors; n++) {
        free(s->tensors[n].f);
        free(s->tensors[n].i);
    }
    free(s->tensors);
    s->tensors = NULL;
    s->num_tensors = 0;
}

// a record name for a message: bytes outside printable ASCII (a corrupt file's newlines) become '?'
static inline void debug_state_printable_name(const char* name, char out[64]) {
    for (int k = 0; k < 64; k++) {
        const unsigned char ch = (unsigned char)name[k];
        out[k] = ch == '\0' ? '\0' : (ch >= 0x20 && ch < 0x7f ? (char)ch : '?');
        if (ch == '\0') { break; }
    }
    out[63] = '\0';
}

// Returns 1 on success, else 0 with a one-line message naming the file and what was wrong.
static inline int debug_state_load(const char* path, DebugState* s, char* msg, size_t msg_size) {
    memset(s, 0, sizeof(*s));
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, msg_size, "%s: cannot open debug state file (HINT: make test generates it with "
                 "dev/reference/train_gpt2.py)", path);
        return 0;
    }
    struct stat st; // a directory opens, then reads as an empty file
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(msg, msg_size, "%s: is a directory, expected a debug state file", path);
        fclose(f);
        return 0;
    }
    // the file size bounds every record, so that a corrupt count is refused before it is allocated
    long long file_size = -1;
    if (fseek(f, 0, SEEK_END) == 0) { file_size = (long long)ftell(f); }
    int header[256];
    if (fseek(f, 0, SEEK_SET) != 0 || fread(header, sizeof(int), 256, f) != 256) {
        snprintf(msg, msg_size, "%s: truncated debug state file: shorter than its 1024-byte header", path);
        fclose(f);
        return 0;
    }
    if (header[0] != DEBUG_STATE_MAGIC || header[1] != DEBUG_STATE_VERSION) {
        snprintf(msg, msg_size, "%s: bad debug state header (magic %d version %d), expected magic %d version %d",
                 path, header[0], header[1], DEBUG_STATE_MAGIC, DEBUG_STATE_VERSION);
        fclose(f);
        return 0;
    }
    s->B = header[2];
    s->T = header[3];
    s->num_tensors = header[4];
    s->num_steps = header[5];
    if (s->B < 1 || s->T < 1 || s->num_tensors < 1 || s->num_tensors > 100000 || s->num_steps < 0) {
        snprintf(msg, msg_size, "%s: corrupt debug state header (B=%d T=%d records=%d steps=%d)",
                 path, s->B, s->T, s->num_tensors, s->num_steps);
        fclose(f);
        s->num_tensors = 0;
        return 0;
    }
    s->tensors = (DebugTensor*)calloc((size_t)s->num_tensors, sizeof(DebugTensor));
    for (int n = 0; n < s->num_tensors; n++) {
        DebugTensor* t = &s->tensors[n];
        int meta[8];
        if (fread(t->name, 1, 64, f) != 64 || fread(meta, sizeof(int), 8, f) != 8) {
            snprintf(msg, msg_size, "%s: truncated debug state file: record %d of %d is missing", path, n, s->num_tensors);
            s->num_tensors = n;
            debug_state_free(s);
            fclose(f);
            return 0;
        }
        t->name[63] = '\0';
        t->dtype = meta[0];
        t->ndim = meta[1];
        t->numel = 1;
        int ok = (t->dtype == DEBUG_F32 || t->dtype == DEBUG_I32 || t->dtype == DEBUG_F64) && t->ndim >= 1 && t->ndim <= 4;
        for (int d = 0; d < 4 && ok; d++) {
            t->dims[d] = meta[2 + d];
            ok = t->dims[d] >= 1 && t->dims[d] <= (1 << 28);
            t->numel *= ok ? (size_t)t->dims[d] : 1;
        }
        char name[64];
        debug_state_printable_name(t->name, name);
        if (!ok || t->numel > ((size_t)1 << 31)) {
            snprintf(msg, msg_size, "%s: corrupt record %d ('%s'): dtype %d ndim %d", path, n, name, meta[0], meta[1]);
            s->num_tensors = n + 1;
            debug_state_free(s);
            fclose(f);
            return 0;
        }
        const size_t elem = t->dtype == DEBUG_F64 ? 8 : 4;
        const long long left = file_size - (long long)ftell(f);
        size_t got = left > 0 ? (size_t)left / elem : 0;
        if (got >= t->numel) {
            float* tmp = NULL;
            if (t->dtype == DEBUG_I32) {
                t->i = (int*)malloc(t->numel * sizeof(int));
            } else {
                t->f = (double*)malloc(t->numel * sizeof(double));
                if (t->dtype == DEBUG_F32) { tmp = (float*)malloc(t->numel * sizeof(float)); }
            }
            if ((t->i == NULL && t->f == NULL) || (t->dtype == DEBUG_F32 && tmp == NULL)) {
                snprintf(msg, msg_size, "%s: out of memory for record '%s' (%zu values)", path, name, t->numel);
                free(tmp);
                s->num_tensors = n + 1;
                debug_state_free(s);
                fclose(f);
                return 0;
            }
            if (t->dtype == DEBUG_I32) {
                got = fread(t->i, sizeof(int), t->numel, f);
            } else if (t->dtype == DEBUG_F64) {
                got = fread(t->f, sizeof(double), t->numel, f);
            } else {
                got = fread(tmp, sizeof(float), t->numel, f);
                for (size_t k = 0; k < got; k++) { t->f[k] = tmp[k]; }
                free(tmp);
            }
        }
        if (got < t->numel) {
            snprintf(msg, msg_size, "%s: truncated debug state file: record '%s' has %zu of %zu values",
                     path, name, got, t->numel);
            s->num_tensors = n + 1;
            debug_state_free(s);
            fclose(f);
            return 0;
        }
    }
    if (fgetc(f) != EOF) {
        snprintf(msg, msg_size, "%s: trailing bytes after the %d records of the debug state file", path, s->num_tensors);
        debug_state_free(s);
        fclose(f);
        return 0;
    }
    fclose(f);
    return 1;
}

static inline const DebugTensor* debug_state_find(const DebugState* s, const char* name) {
    for (int n = 0; n < s->num_tensors; n++) {
        if (strcmp(s->tensors[n].name, name) == 0) { return &s->tensors[n]; }
    }
    return NULL;
}

// ||out - ref|| / ||ref|| in double. A zero reference compares absolutely (||out||), and a
// non-finite value anywhere gives +inf, so NaNs can never pass a threshold.
static inline double rel_error(const float* out, const double* ref, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t k = 0; k < n; k++) {
        double d = (double)out[k] - ref[k];
        num += d * d;
        den += ref[k] * ref[k];
    }
    if (!isfinite(num) || !isfinite(den)) { return INFINITY; }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

// Same, for a strided slice of `out`: rows of `cols` values taken from rows of `out_stride`
// (e.g. logits (B*T, Vp) against the reference's (B*T, V)).
static inline double rel_error_strided(const float* out, size_t out_stride, const double* ref, size_t rows, size_t cols) {
    double num = 0.0, den = 0.0;
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < cols; c++) {
            double d = (double)out[r * out_stride + c] - ref[r * cols + c];
            num += d * d;
            den += ref[r * cols + c] * ref[r * cols + c];
        }
    }
    if (!isfinite(num) || !isfinite(den)) { return INFINITY; }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

#endif // DEBUG_STATE_H
