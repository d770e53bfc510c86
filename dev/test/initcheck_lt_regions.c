/*
initcheck_lt_regions.c: an LD_PRELOAD shim for the initcheck runs of dev/test/gpu_suite.sh (stage
sanitize_initcheck). It wraps cublasLtMatmul and, before handing the call to the library, appends
the memory that call will write to the file named by $LT_REGIONS_FILE, one line per output:

  lt_region D   base=0x7f1c2e000000 esize=2 rows=768 cols=256 ld=768 batch=1 stride=0
  lt_region aux base=0x7f1c30000000 esize=2 rows=3072 cols=256 ld=3072 batch=1 stride=0

rows x cols column-major with leading dimension ld (elements of esize bytes), batch matrices
stride elements apart: exactly the elements cuBLASLt writes (D; the GELU epilogue's aux output,
the pre-activation, laid out by CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD). The padding between
columns (ld > rows) is not in a region. dev/test/initcheck_filter.py then drops the initcheck
reports of reads that lie wholly inside such a region (memory only cuBLASLt wrote, with stores the
tool does not track: see dev/results/README.md) and keeps every other report.

Why a shim: the trainer (train_gpt2.cu) is left as it is, and the regions come from the library's
own descriptors at the call, not from a list typed by hand. The trainer calls cublasLtMatmul in one
place (matmul_lt) with C == D; epilogues BIAS, GELU_AUX(_BIAS) and DGELU (aux read, not written).
Other epilogues that write (BGRAD*, RELU_AUX) are reported on stderr as unsupported, never guessed.

Build (gpu_suite.sh does this on the GPU machine; dev/test/test_gpu_suite.sh on any machine with
the CUDA headers and libcublasLt, calling it through a small driver without a GPU):

  gcc -shared -fPIC -O2 -I$CUDA_HOME/include dev/test/initcheck_lt_regions.c -o lt_regions.so -ldl
  LD_PRELOAD=$PWD/lt_regions.so LT_REGIONS_FILE=regions.txt \
      compute-sanitizer --tool initcheck --nvtx yes ./train_gpt2cu ...

Marking, not only recording (added after the 2026-11-26 H200 run): compute-sanitizer 2025.3.1 (CUDA
13.0) reported every read of a BF16 cuBLASLt output as uninitialized, thousands per run, and its
device-side record buffer overflowed ("Error buffer overflow has been detected. Some records have
been dropped"), so reports were lost before the filter could classify them. So, once the library
has accepted the call, the shim also tells the tool that the same elements are initialized, in
stream order after the matmul, through the NVTX memory API for Compute Sanitizer
(nvtxMemCudaMarkInitialized; honoured with --nvtx yes). Then our kernels' reads of matmul outputs are
not reported at all; cuBLASLt's own reads of D inside the call still are, and the filter drops them.
Before the call, one line per output says what will be marked ("lt_mark D ranges=N bytes=B": one
range per column when ld > rows, else one per batch matrix); after it, "lt_marked D" when it was.
When beta is a host 0, D is also marked before the call ("lt_premark D"): cuBLASLt's own epilogue
kernel reads D inside the call, and a mark after the call comes too late for it (on the 2026-11-26
H200 its reads were all 256 printed reports of standard_hd64, before 163,584 more were skipped on a
second overflow, most likely of the same reads). With beta != 0, D is read as C and must have been
written before: no mark then, so that an accumulation into memory nobody zeroed is still reported.
LT_MARK_INITIALIZED=0 records without marking (the filter alone, as before).
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cublasLt.h>
#include <nvtx3/nvToolsExtMemCudaRt.h>

typedef cublasStatus_t (*lt_matmul_fn)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                                       cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t, const void*,
                                       const void*, cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t,
                                       const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t);

static size_t type_size(int32_t t) {
    switch (t) {
        case CUDA_R_32F: return 4;
        case CUDA_R_16F: case CUDA_R_16BF: return 2;
        case CUDA_R_64F: return 8;
        case CUDA_R_8I: case CUDA_R_8U: case CUDA_R_8F_E4M3: case CUDA_R_8F_E5M2: return 1;
        case CUDA_R_32I: return 4;
        default: return 0;
    }
}

// One attribute of a layout or a matmul descriptor as a number. cuBLASLt answers only a buffer of
// the attribute's exact size: ask the size first (a NULL buffer of 0 bytes), then the value (4 or
// 8 bytes, read as int32 or int64), else the fallback.
static int64_t as_number(const unsigned char* buf, size_t n, int64_t fallback) {
    if (n == 4) { int32_t w; memcpy(&w, buf, 4); return w; }
    if (n == 8) { int64_t w; memcpy(&w, buf, 8); return w; }
    return fallback;
}

static int64_t layout_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, int64_t fallback) {
    unsigned char buf[8] = {0};
    size_t n = 0, written = 0;
    cublasLtMatrixLayoutGetAttribute(l, a, NULL, 0, &n);
    if (n == 0 || n > sizeof(buf) || cublasLtMatrixLayoutGetAttribute(l, a, buf, n, &written) != CUBLAS_STATUS_SUCCESS) {
        return fallback;
    }
    return as_number(buf, n, fallback);
}

static int64_t desc_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, int64_t fallback) {
    unsigned char buf[8] = {0};
    size_t n = 0, written = 0;
    cublasLtMatmulDescGetAttribute(d, a, NULL, 0, &n);
    if (n == 0 || n > sizeof(buf) || cublasLtMatmulDescGetAttribute(d, a, buf, n, &written) != CUBLAS_STATUS_SUCCESS) {
        return fallback;
    }
    return as_number(buf, n, fallback);
}

static void log_region(FILE* f, const char* kind, const void* base, size_t esize, int64_t rows, int64_t cols,
                       int64_t ld, int64_t batch, int64_t stride) {
    fprintf(f, "lt_region %s base=%p esize=%zu rows=%lld cols=%lld ld=%lld batch=%lld stride=%lld\n", kind, base,
            esize, (long long)rows, (long long)cols, (long long)ld, (long long)batch, (long long)stride);
}

// The byte ranges a call writes into one output, for the NVTX mark: a batch matrix is one range when
// its columns are contiguous (ld == rows), else one range per column, so the padding between
// columns stays unmarked, as the filter leaves it. A batch stride of 0 is one matrix written once.
typedef struct {
    nvtxMemVirtualRangeDesc_t* ranges;
    size_t count;
    size_t bytes;
} MarkRanges;

static MarkRanges mark_ranges(const void* base, size_t esize, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                              int64_t stride) {
    MarkRanges m = {NULL, 0, 0};
    if (base == NULL || esize == 0 || rows <= 0 || cols <= 0) { return m; }
    if (ld < rows) { ld = rows; }
    if (batch < 1 || stride == 0) { batch = 1; }
    const int contiguous = ld == rows;
    const size_t per_matrix = contiguous ? 1 : (size_t)cols;
    m.ranges = (nvtxMemVirtualRangeDesc_t*)calloc(per_matrix * (size_t)batch, sizeof(nvtxMemVirtualRangeDesc_t));
    if (m.ranges == NULL) { return m; }
    for (int64_t b = 0; b < batch; b++) {
        const char* matrix = (const char*)base + (size_t)(b * stride) * esize;
        for (size_t c = 0; c < per_matrix; c++) {
            nvtxMemVirtualRangeDesc_t* r = &m.ranges[m.count++];
            r->ptr = matrix + c * (size_t)ld * esize;
            r->size = (contiguous ? (size_t)rows * (size_t)cols : (size_t)rows) * esize;
            m.bytes += r->size;
        }
    }
    return m;
}

// True when the call's beta is a host scalar equal to 0, so that D's earlier contents do not enter
// the result. Only then may D be marked initialized before the call: with beta != 0 the call reads
// D as C, and a read of a gradient nobody zeroed must still be reported.
static int beta_is_zero(cublasLtMatmulDesc_t op, const void* beta) {
    if (beta == NULL ||
        desc_attr(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_HOST) != CUBLASLT_POINTER_MODE_HOST) {
        return 0;
    }
    const int64_t scale = desc_attr(op, CUBLASLT_MATMUL_DESC_SCALE_TYPE, CUDA_R_32F);
    if (scale == CUDA_R_32F) { float b; memcpy(&b, beta, sizeof(b)); return b == 0.0f; }
    if (scale == CUDA_R_64F) { double b; memcpy(&b, beta, sizeof(b)); return b == 0.0; }
    return 0;
}

static void mark_initialized(MarkRanges m, cudaStream_t stream) {
    static nvtxDomainHandle_t domain = NULL;
    if (m.count == 0) { return; }
    if (domain == NULL) { domain = nvtxDomainCreateA("initcheck_lt_regions"); }
    nvtxMemMarkInitializedBatch_t batch;
    memset(&batch, 0, sizeof(batch));
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof(batch);
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.regionDescCount = m.count;
    batch.regionDescElementSize = sizeof(nvtxMemVirtualRangeDesc_t);
    batch.regionDescElements = m.ranges;
    nvtxMemCudaMarkInitialized(domain, stream, 0, &batch);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
    static lt_matmul_fn real = NULL;
    if (real == NULL) {
        real = (lt_matmul_fn)dlsym(RTLD_NEXT, "cublasLtMatmul");
        if (real == NULL) {
            fprintf(stderr, "initcheck_lt_regions: cublasLtMatmul not found after the shim (%s)\n", dlerror());
            return CUBLAS_STATUS_NOT_INITIALIZED;
        }
    }
    const char* path = getenv("LT_REGIONS_FILE");
    const char* mark_env = getenv("LT_MARK_INITIALIZED");
    const int marking = mark_env == NULL || strcmp(mark_env, "0") != 0;
    MarkRanges mark_d = {NULL, 0, 0}, mark_aux = {NULL, 0, 0};
    int premark = 0;
    FILE* f = path != NULL ? fopen(path, "a") : NULL;
    if (f != NULL) {
        const int64_t order = layout_attr(Ddesc, CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_COL);
        const size_t es = type_size((int32_t)layout_attr(Ddesc, CUBLASLT_MATRIX_LAYOUT_TYPE, -1));
        const int64_t rows = layout_attr(Ddesc, CUBLASLT_MATRIX_LAYOUT_ROWS, 0);
        const int64_t cols = layout_attr(Ddesc, CUBLASLT_MATRIX_LAYOUT_COLS, 0);
        const int64_t ld = layout_attr(Ddesc, CUBLASLT_MATRIX_LAYOUT_LD, rows);
        const int64_t batch = layout_attr(Ddesc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
        const int64_t stride = layout_attr(Ddesc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 0);
        if (order != CUBLASLT_ORDER_COL || es == 0) {
            fprintf(f, "lt_unsupported D order=%lld esize=%zu\n", (long long)order, es);
        } else {
            log_region(f, "D", D, es, rows, cols, ld, batch, stride);
            if (marking) { mark_d = mark_ranges(D, es, rows, cols, ld, batch, stride); }
        }
        const int64_t epi = desc_attr(op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
        if (epi == CUBLASLT_EPILOGUE_GELU_AUX || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
            void* aux = (void*)(intptr_t)desc_attr(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, 0);
            const int64_t aux_ld = desc_attr(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld);
            const int64_t aux_type = desc_attr(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, -1);
            const size_t aux_es = aux_type < 0 ? es : type_size((int32_t)aux_type); // -1: D's type
            const int64_t aux_stride = desc_attr(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, 0);
            if (aux != NULL && aux_es != 0) {
                log_region(f, "aux", aux, aux_es, rows, cols, aux_ld, batch, aux_stride);
                if (marking) { mark_aux = mark_ranges(aux, aux_es, rows, cols, aux_ld, batch, aux_stride); }
            }
        } else if (epi != CUBLASLT_EPILOGUE_DEFAULT && epi != CUBLASLT_EPILOGUE_BIAS && epi != CUBLASLT_EPILOGUE_DGELU) {
            fprintf(f, "lt_unsupported epilogue=%lld\n", (long long)epi);
        }
        if (mark_d.count > 0) { fprintf(f, "lt_mark D ranges=%zu bytes=%zu\n", mark_d.count, mark_d.bytes); }
        if (mark_aux.count > 0) { fprintf(f, "lt_mark aux ranges=%zu bytes=%zu\n", mark_aux.count, mark_aux.bytes); }
        premark = mark_d.count > 0 && beta_is_zero(op, beta);
        if (premark) { fprintf(f, "lt_premark D\n"); }
        fclose(f);
    }
    // cuBLASLt may finish a matmul in a second kernel (its epilogue) that reads the D its first one
    // stored with untracked writes, inside the call (the header says what the H200 showed): with
    // beta == 0, D is marked before the call as well.
    if (premark) { mark_initialized(mark_d, stream); }
    const cublasStatus_t status = real(handle, op, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
                                       workspace, workspaceSizeInBytes, stream);
    // only a call the library accepted writes its outputs: a refused one marks nothing
    if (status == CUBLAS_STATUS_SUCCESS && (mark_d.count > 0 || mark_aux.count > 0)) {
        mark_initialized(mark_d, stream);
        mark_initialized(mark_aux, stream);
        FILE* g = fopen(path, "a");
        if (g != NULL) {
            if (mark_d.count > 0) { fprintf(g, "lt_marked D\n"); }
            if (mark_aux.count > 0) { fprintf(g, "lt_marked aux\n"); }
            fclose(g);
        }
    }
    free(mark_d.ranges);
    free(mark_aux.ranges);
    return status;
}
