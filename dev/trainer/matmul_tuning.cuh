/*
dev/trainer/matmul_tuning.cuh: the CUDA trainer's matmul tuner (--lt_tune 1, the default), included
by train_gpt2.cu just before matmul_lt, which asks it for each configuration's algorithm (lt_choice),
and the tuning pass's file, lt_algos.bin, which train_run writes and a resume reads.
*/
#ifndef DEV_TRAINER_MATMUL_TUNING_CUH
#define DEV_TRAINER_MATMUL_TUNING_CUH

// Every matmul configuration (every argument that can change the algorithm choice: its LtKey) is
// decided once (lt_choice), so that the same shape always runs the same algorithm.
typedef struct { long long v[20]; } LtKey; // every argument that can change the algorithm choice
typedef struct {
    int found;                 // 0: cuBLASLt has no algorithm (remembered)
    cublasLtMatmulAlgo_t algo; // what every call of the configuration runs
    int in_pass;               // decided in the tuning window (timed), or read from lt_algos.bin: the file keeps it
    int candidates, place;     // cuBLASLt's candidates then, and the choice's place among them (0: its first)
    double first_ms, chosen_ms; // the timed medians of its first and of the choice (0 when nothing was timed)
    int pass_calls;            // the configuration's calls in the tuning window: a micro-step's (the saving's weight)
    int own_epilogue;          // the epilogue's work by the trainer's own kernel after a matmul without it was
                               // measured faster: matmul_lt returns 0 and the caller's fallback runs that pair
} LtChoice;
static std::vector<std::pair<LtKey, LtChoice>> g_lt_cache;

// ----------------------------------------------------------------------------
// matmul tuning (--lt_tune 1, the default). cuBLASLt's heuristic ranks its algorithms by a model, and its
// first is not always the fastest: at d12 on an H200 the same FLOPs ran at 528 TFLOP/s in fc's forward
// (GELU epilogue) and 805 in fcproj's. So the run's first micro-step (train_run) meets every matmul
// configuration of a micro-step with the tuning window open; for each, matmul_lt asks for cuBLASLt's best
// LT_TUNE_MAX_ALGOS, runs each on the call's own inputs into scratch outputs (the call's outputs are left
// alone), rejects any whose result differs from the heuristic's first, times the rest (one warm-up, then
// the median of LT_TUNE_RUNS launches) and keeps the fastest, which the call itself then runs. Split-k candidates reduce in fp32 only: the
// preference's reduction mask (matmul_lt) already says so. The processes of one run add their times, so
// that all keep the same algorithm. The choices go to -o's lt_algos.bin (dev/FORMATS.md), which a resume
// reads, so that it continues bit for bit; --lt_tune 0 is the heuristic's first everywhere, untimed.
// A configuration with an epilogue the trainer can do itself (GELU_AUX_BIAS, DGELU, BGRADB) is also timed
// as the pair its caller falls back to: the fastest matmul without the epilogue, then the trainer's own
// kernel (gelu_forward, gelu_backward, bias_backward). The pair counts only when it is faster by
// LT_PAIR_MIN_GAIN: nearer than that, timing noise would pick one or the other from run to run and from
// process to process (the CPU runtime's tuning test in two processes did, where the epilogue's work
// costs what the kernel's does); the measured case it exists for, the H200's GELU epilogue at 528
// TFLOP/s where the same GEMM ran at 805 without it, gains far more.
#define LT_TUNE_MAX_ALGOS 16
#define LT_TUNE_RUNS 5
#define LT_PAIR_MIN_GAIN 0.05
static const double LT_REJECTED_MS = 1e30; // a candidate that failed the comparison (summed over processes)
typedef struct {
    int open;            // 1 in the tuning window (the first micro-step): a configuration is tuned as it is met
    DataParallel* dp;    // the run's processes (their times are summed), or NULL alone
    std::vector<std::pair<LtKey, cublasLtMatmulAlgo_t>> saved; // lt_algos.bin's choices, when a resume read it
    int timed, read, stale, rejected, not_first; // configurations timed now / taken from the file / in the
                                                 // file but not offered now; candidates rejected; choices
                                                 // other than the heuristic's first
    int warned_memory;
    double seconds;      // host time in lt_time_candidates: what tuning adds to the first micro-step
} LtTuner;
static LtTuner g_lt_tuner;

// one matmul_lt call, as the tuner runs it again into scratch outputs
typedef struct {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    const floatX* A;
    const floatX* B;
    void* D; // also the C input (beta)
    size_t d_size;
    float alpha, beta;
    LtActivation act;
    const void* bias;   // written by LT_BGRADB (n values of D's type)
    const floatX* aux;  // written by LT_GELU (laid out like D)
    int m, n, k, ldd, batch;
    long long sD;
    cublasLtEpilogue_t epilogue;
    int transA, transB; // for the call's pair (lt_pair_ms): the same matmul without the epilogue
} LtCall;

// the epilogue of a matmul_lt call: the bias, GELU with its aux output, its derivative, or the bias gradient
static cublasLtEpilogue_t lt_epilogue_of(LtActivation act, const void* bias) {
    if (act == LT_GELU) { return bias != NULL ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX; }
    if (act == LT_DGELU) { return CUBLASLT_EPILOGUE_DGELU; }
    if (act == LT_BGRADB) { return CUBLASLT_EPILOGUE_BGRADB; }
    return bias != NULL ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

// A matmul's operation: fp32 compute, the transposes, the epilogue with its pointers (aux laid out like D,
// leading dimension ldd; the bias of bias_type)
static cublasLtMatmulDesc_t lt_op_create(int transA, int transB, cublasLtEpilogue_t epilogue, const void* bias,
                                         cudaDataType bias_type, const floatX* aux, int ldd) {
    cublasLtMatmulDesc_t op;
    cublasCheck(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    cublasCheck(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cublasCheck(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (aux != NULL) { // the GELU input: written by LT_GELU, read by LT_DGELU
        cublasCheck(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
        const int64_t aux_ld = ldd;
        cublasCheck(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }
    if (bias != NULL) {
        cublasCheck(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
        cublasCheck(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    }
    return op;
}

// cuBLASLt's candidates for a call, best first by its heuristic, at most `want`. Returns how many (0:
// none). "No algorithm" comes back either as 0 results or as CUBLAS_STATUS_NOT_SUPPORTED; with an
// epilogue, INVALID_VALUE too (a cuBLASLt that rejects, say, an fp32 bias gradient beside bf16 inputs):
// said once per epilogue, and the caller's fallback runs.
static int lt_candidates(const LtCall* c, int want, cublasLtMatmulHeuristicResult_t* out) {
    int found = 0;
    memset(out, 0, sizeof(out[0]) * (size_t)want);
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g_cublaslt, c->op, c->la, c->lb, c->ld, c->ld, c->pref, want,
                                                             out, &found);
    const int has_epilogue = c->bias != NULL || c->act != LT_PLAIN;
    if (st == CUBLAS_STATUS_INVALID_VALUE && has_epilogue) {
        static std::vector<int> warned;
        if (std::find(warned.begin(), warned.end(), (int)c->epilogue) == warned.end()) {
            warned.push_back((int)c->epilogue);
            fprintf(stderr, "warning: cuBLASLt rejects epilogue %d (first at m=%d n=%d k=%d: CUBLAS_STATUS_INVALID_VALUE): "
                    "the trainer's own kernels do its work\n", (int)c->epilogue, c->m, c->n, c->k);
        }
    } else if (st != CUBLAS_STATUS_NOT_SUPPORTED) {
        cublasCheck(st);
    }
    if (st != CUBLAS_STATUS_SUCCESS) { return 0; }
    int usable = 0; // the heuristic's list, less any entry it marks as failed
    for (int i = 0; i < found; i++) {
        if (out[i].state == CUBLAS_STATUS_SUCCESS) { out[usable++] = out[i]; }
    }
    return usable;
}

// per block: the sums of (x - ref)^2 and ref^2 over a (rows, cols) matrix of `batch` batches (leading
// dimension ld, batch stride), fp32 or floatX: the tuner's comparison of a candidate with the first
__global__ void lt_diff_kernel(float* partial, const void* x, const void* ref, int fp32, int rows, int cols, int ld,
                               int batch, long long stride) {
    __shared__ float sd[256], sr[256];
    const long long total = (long long)rows * cols * batch;
    float d2 = 0.0f, r2 = 0.0f;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        const long long b = i / ((long long)rows * cols), rem = i % ((long long)rows * cols);
        const long long at = b * stride + (rem / rows) * ld + rem % rows;
        const float xv = fp32 ? ((const float*)x)[at] : x2f(((const floatX*)x)[at]);
        const float rv = fp32 ? ((const float*)ref)[at] : x2f(((const floatX*)ref)[at]);
        d2 += (xv - rv) * (xv - rv);
        r2 += rv * rv;
    }
    sd[threadIdx.x] = d2;
    sr[threadIdx.x] = r2;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            sd[threadIdx.x] += sd[threadIdx.x + s];
            sr[threadIdx.x] += sr[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = sd[0];
        partial[2 * blockIdx.x + 1] = sr[0];
    }
}
#define LT_DIFF_BLOCKS 128

// ||x - ref|| / ||ref|| of one output (0 when both are zero)
static double lt_relative_diff(float* partial_d, const void* x, const void* ref, int fp32, int rows, int cols, int ld,
                               int batch, long long stride) {
    lt_diff_kernel<<<LT_DIFF_BLOCKS, 256>>>(partial_d, x, ref, fp32, rows, cols, ld, batch, stride);
    launchCheck();
    float partial[2 * LT_DIFF_BLOCKS];
    cudaCheck(cudaMemcpy(partial, partial_d, sizeof(partial), cudaMemcpyDeviceToHost));
    double d2 = 0.0, r2 = 0.0;
    for (int i = 0; i < LT_DIFF_BLOCKS; i++) { d2 += partial[2 * i]; r2 += partial[2 * i + 1]; }
    return r2 > 0.0 ? sqrt(d2 / r2) : (d2 > 0.0 ? INFINITY : 0.0);
}

// The scratch outputs of one run of a call: D, and aux (LT_GELU) or the bias (LT_BGRADB) where the
// epilogue writes them.
typedef struct { void* D; void* aux; void* bias; } LtOutputs;

// points the call's descriptor at where its epilogue writes: aux (LT_GELU) or the bias (LT_BGRADB)
static void lt_point_epilogue(const LtCall* c, const void* aux, const void* bias) {
    if (c->act == LT_GELU) {
        cublasCheck(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    }
    if (c->act == LT_BGRADB) {
        cublasCheck(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
}

// the call with `algo` into `out` (C is still the call's D, read when beta != 0); cuBLASLt's status (a
// candidate it cannot run after all is rejected, not fatal)
static cublasStatus_t lt_run_into(const LtCall* c, const cublasLtMatmulAlgo_t* algo, const LtOutputs* out) {
    lt_point_epilogue(c, out->aux, out->bias);
    return cublasLtMatmul(g_cublaslt, c->op, &c->alpha, c->A, c->la, c->B, c->lb, &c->beta, c->D, c->ld, out->D, c->ld,
                          algo, g_cublaslt_workspace, CUBLASLT_WORKSPACE_SIZE, 0);
}

// The worst relative difference of a candidate's outputs from the first's.
static double lt_outputs_diff(const LtCall* c, float* partial_d, const LtOutputs* x, const LtOutputs* ref) {
    const int fp32 = c->d_size == 4;
    double worst = lt_relative_diff(partial_d, x->D, ref->D, fp32, c->m, c->n, c->ldd, c->batch, c->sD);
    if (c->act == LT_GELU) { worst = fmax(worst, lt_relative_diff(partial_d, x->aux, ref->aux, fp32, c->m, c->n, c->ldd, 1, 0)); }
    if (c->act == LT_BGRADB) { worst = fmax(worst, lt_relative_diff(partial_d, x->bias, ref->bias, fp32, c->n, 1, c->n, 1, 0)); }
    return worst;
}

// The median in ms of LT_TUNE_RUNS launches, each between its pair of events (ev[2 r], ev[2 r + 1]),
// once the last has run
static double lt_median_ms(const cudaEvent_t* ev) {
    cudaCheck(cudaEventSynchronize(ev[2 * LT_TUNE_RUNS - 1]));
    double ms[LT_TUNE_RUNS];
    for (int r = 0; r < LT_TUNE_RUNS; r++) {
        float t = 0.0f;
        cudaCheck(cudaEventElapsedTime(&t, ev[2 * r], ev[2 * r + 1]));
        ms[r] = t;
    }
    std::sort(ms, ms + LT_TUNE_RUNS);
    return ms[LT_TUNE_RUNS / 2];
}

// Each candidate's median time in ms (times[i]), LT_REJECTED_MS for one whose result differs from the
// heuristic's first (candidate 0, the reference) by more than a different summation order can: 1e-2
// relative in bf16 outputs, 1e-4 in fp32 ones. Nothing is timed when there is one candidate, unless
// time_alone (the pair's matmul, whose time is weighed against the epilogue's); when the scratch outputs
// do not fit the GPU, the first is kept (time 0), said once. With time_alone, a first that was not timed
// (no scratch, or it does not run) is LT_REJECTED_MS: the pair is then not taken.
static void lt_time_candidates(const LtCall* c, const cublasLtMatmulHeuristicResult_t* cands, int n, double* times,
                               int time_alone) {
    times[0] = time_alone ? LT_REJECTED_MS : 0.0;
    for (int i = 1; i < n; i++) { times[i] = LT_REJECTED_MS; }
    if (n < 2 && !time_alone) { return; }
    const double t0 = now_seconds();
    const size_t d_bytes = ((size_t)(c->batch - 1) * (size_t)c->sD + (size_t)(c->n - 1) * (size_t)c->ldd + (size_t)c->m) * c->d_size;
    const size_t aux_bytes = c->act == LT_GELU ? d_bytes : 0, bias_bytes = c->act == LT_BGRADB ? (size_t)c->n * c->d_size : 0;
    const size_t round = 256, per = (d_bytes + round - 1) / round * round + (aux_bytes + round - 1) / round * round +
                                    (bias_bytes + round - 1) / round * round;
    char* scratch = NULL;
    if (cudaMalloc((void**)&scratch, 2 * per + 2 * LT_DIFF_BLOCKS * sizeof(float)) != cudaSuccess) {
        (void)cudaGetLastError();
        if (!g_lt_tuner.warned_memory) {
            g_lt_tuner.warned_memory = 1;
            fprintf(stderr, "warning: matmul tuning: no GPU memory for the scratch outputs of m=%d n=%d k=%d (%.1f MiB): "
                    "cuBLASLt's first choice there and for any such shape\n", c->m, c->n, c->k, 2.0 * per / 1048576.0);
        }
        return;
    }
    LtOutputs outs[2];
    for (int j = 0; j < 2; j++) {
        char* p = scratch + j * per;
        outs[j].D = p;
        outs[j].aux = aux_bytes > 0 ? p + (d_bytes + round - 1) / round * round : NULL;
        outs[j].bias = bias_bytes > 0 ? p + (d_bytes + round - 1) / round * round + (aux_bytes + round - 1) / round * round : NULL;
    }
    float* partial_d = (float*)(scratch + 2 * per);
    cudaEvent_t ev[2 * LT_TUNE_RUNS];
    for (int r = 0; r < 2 * LT_TUNE_RUNS; r++) { cudaCheck(cudaEventCreate(&ev[r])); }
    for (int i = 0; i < n; i++) {
        const LtOutputs* out = &outs[i == 0 ? 0 : 1];
        const cublasStatus_t st = lt_run_into(c, &cands[i].algo, out); // its result, and the warm-up
        if (i == 0 && st != CUBLAS_STATUS_SUCCESS) { break; } // no reference: the call itself says what fails
        if (i > 0) {
            const double diff = st == CUBLAS_STATUS_SUCCESS ? lt_outputs_diff(c, partial_d, out, &outs[0]) : INFINITY;
            if (!(diff <= (c->d_size == 4 ? 1e-4 : 1e-2))) {
                g_lt_tuner.rejected++;
                if ((g_lt_tuner.dp == NULL || g_lt_tuner.dp->rank == 0) && st != CUBLAS_STATUS_SUCCESS) {
                    printf("matmuls: cuBLASLt's candidate %d of %d for m=%d n=%d k=%d (epilogue %d) does not run (status "
                           "%d): not used\n", i + 1, n, c->m, c->n, c->k, (int)c->epilogue, (int)st);
                } else if (g_lt_tuner.dp == NULL || g_lt_tuner.dp->rank == 0) {
                    printf("matmuls: cuBLASLt's candidate %d of %d for m=%d n=%d k=%d (epilogue %d) differs from its first "
                           "choice by %.3g (relative): not used\n", i + 1, n, c->m, c->n, c->k, (int)c->epilogue, diff);
                }
                continue;
            }
        }
        for (int r = 0; r < LT_TUNE_RUNS; r++) { // (it ran once above: it runs again)
            cudaCheck(cudaEventRecord(ev[2 * r], 0));
            cublasCheck(lt_run_into(c, &cands[i].algo, out));
            cudaCheck(cudaEventRecord(ev[2 * r + 1], 0));
        }
        times[i] = lt_median_ms(ev);
    }
    for (int r = 0; r < 2 * LT_TUNE_RUNS; r++) { cudaCheck(cudaEventDestroy(ev[r])); }
    cudaCheck(cudaFree(scratch));
    g_lt_tuner.seconds += now_seconds() - t0;
    lt_point_epilogue(c, c->aux, c->bias); // the call itself writes its own outputs again
}

// the trainer's own kernels for the epilogues' work (the GELU section, the bias gradient's below)
static void gelu_forward(floatX* out, const floatX* inp, size_t n);
static void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t n);
static void bias_backward(float* dbias, const floatX* dout, int N, int OC);

// whether the call's caller has a fallback that does its epilogue's work with the trainer's own kernel
// after the matmul without it (matmul_forward_gelu, matmul_backward_gelu, matmul_backward_params); a
// GELU's or its derivative's kernel runs over D as one matrix
static int lt_has_own_epilogue(const LtCall* c) {
    if (c->act == LT_BGRADB) { return 1; }
    return (c->act == LT_GELU || c->act == LT_DGELU) && c->batch == 1 && c->ldd == c->m;
}

// The own kernel of a call's epilogue on scratch (zeroed: nothing uninitialized is read), in ms: one
// warm-up, then the median of LT_TUNE_RUNS launches. GELU over an m x n output, its derivative in place
// with the call's aux (the forward's pre-activation), or dY's column sums (the call's B, k rows of n).
static double lt_own_epilogue_ms(const LtCall* c) {
    const size_t elems = (size_t)c->m * c->n;
    const size_t bytes = c->act == LT_BGRADB ? (size_t)c->n * sizeof(float) : (c->act == LT_GELU ? 2 : 1) * elems * sizeof(floatX);
    char* scratch = NULL;
    if (cudaMalloc((void**)&scratch, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return LT_REJECTED_MS; // no room to time it: the epilogue stays
    }
    cudaCheck(cudaMemset(scratch, 0, bytes));
    floatX* x = (floatX*)scratch;
    cudaEvent_t ev[2 * LT_TUNE_RUNS];
    for (int r = 0; r < 2 * LT_TUNE_RUNS; r++) { cudaCheck(cudaEventCreate(&ev[r])); }
    for (int r = -1; r < LT_TUNE_RUNS; r++) { // r = -1: the warm-up
        if (r >= 0) { cudaCheck(cudaEventRecord(ev[2 * r], 0)); }
        if (c->act == LT_GELU) { gelu_forward(x + elems, x, elems); }
        if (c->act == LT_DGELU) { gelu_backward(x, c->aux, x, elems); }
        if (c->act == LT_BGRADB) { bias_backward((float*)scratch, c->B, c->k, c->n); }
        if (r >= 0) { cudaCheck(cudaEventRecord(ev[2 * r + 1], 0)); }
    }
    const double median = lt_median_ms(ev);
    for (int r = 0; r < 2 * LT_TUNE_RUNS; r++) { cudaCheck(cudaEventDestroy(ev[r])); }
    cudaCheck(cudaFree(scratch));
    return median;
}

// The pair a call's caller falls back to, timed: the fastest correct candidate of the same matmul without
// the epilogue (GELU's keeps the bias, as matmul_forward does), and the trainer's own kernel after it.
// Their ms, and the heuristic's first's for that matmul (the report's saving: that matmul is a
// configuration of its own, whose tuning counts from its first); the matmul's are LT_REJECTED_MS when
// cuBLASLt has no algorithm for it.
static void lt_pair_ms(const LtCall* c, double* matmul_ms, double* own_ms, double* matmul_first_ms) {
    LtCall plain = *c;
    plain.act = LT_PLAIN;
    plain.bias = c->act == LT_GELU ? c->bias : NULL;
    plain.aux = NULL;
    plain.epilogue = lt_epilogue_of(LT_PLAIN, plain.bias);
    plain.op = lt_op_create(c->transA, c->transB, plain.epilogue, plain.bias, CUBLAS_X_TYPE, NULL, c->ldd);
    cublasLtMatmulHeuristicResult_t cands[LT_TUNE_MAX_ALGOS];
    double times[LT_TUNE_MAX_ALGOS];
    const int n = lt_candidates(&plain, LT_TUNE_MAX_ALGOS, cands);
    *matmul_ms = *matmul_first_ms = LT_REJECTED_MS;
    if (n > 0) { lt_time_candidates(&plain, cands, n, times, 1); }
    for (int i = 0; i < n; i++) { *matmul_ms = fmin(*matmul_ms, times[i]); }
    if (n > 0) { *matmul_first_ms = times[0]; }
    cublasCheck(cublasLtMatmulDescDestroy(plain.op));
    const double t0 = now_seconds(); // (lt_time_candidates counts its own)
    *own_ms = lt_own_epilogue_ms(c);
    g_lt_tuner.seconds += now_seconds() - t0;
}

// The algorithm a configuration runs from now on. Its choice in lt_algos.bin when a resume read one and
// cuBLASLt still offers that algorithm (on every process alike: no collective); an entry of zero bytes
// there is a pair that won (own_epilogue). Otherwise, outside the tuning window, the heuristic's first
// (one asked for, as without tuning); in it, the fastest correct candidate, timed now, the processes'
// times added up, or the pair its caller falls back to when that is faster still.
static LtChoice lt_decide(const LtCall* c, const LtKey* key) {
    LtChoice choice;
    memset(&choice, 0, sizeof(choice));
    cublasLtMatmulHeuristicResult_t cands[LT_TUNE_MAX_ALGOS];
    const cublasLtMatmulAlgo_t* saved = NULL;
    for (size_t s = 0; s < g_lt_tuner.saved.size() && saved == NULL; s++) {
        if (memcmp(&g_lt_tuner.saved[s].first, key, sizeof(*key)) == 0) { saved = &g_lt_tuner.saved[s].second; }
    }
    const int n = lt_candidates(c, g_lt_tuner.open || saved != NULL ? LT_TUNE_MAX_ALGOS : 1, cands);
    choice.found = n > 0;
    if (n > 0) { choice.algo = cands[0].algo; }
    static const cublasLtMatmulAlgo_t kPairWon = {}; // lt_algos.bin's entry of a pair that won
    if (saved != NULL && n > 0 && lt_has_own_epilogue(c) && memcmp(saved, &kPairWon, sizeof(kPairWon)) == 0) {
        choice.own_epilogue = 1;
        choice.in_pass = 1;
        choice.candidates = n;
        g_lt_tuner.read++;
        return choice;
    }
    for (int i = 0; saved != NULL && i < n; i++) {
        if (memcmp(&cands[i].algo, saved, sizeof(*saved)) == 0) {
            choice.algo = cands[i].algo;
            choice.in_pass = 1;
            choice.candidates = n;
            choice.place = i;
            g_lt_tuner.read++;
            g_lt_tuner.not_first += i > 0;
            return choice;
        }
    }
    if (!g_lt_tuner.open) { return choice; }
    g_lt_tuner.stale += saved != NULL; // saved, but not among cuBLASLt's candidates now: timed again
    choice.in_pass = 1;
    choice.candidates = n;
    DataParallel* dp = g_lt_tuner.dp;
    if (dp != NULL && !dp->alone) { // the same candidates on every process, or the times cannot be added up
        uint64_t h = dp_hash(DP_HASH_SEED, &n, sizeof(n));
        for (int i = 0; i < n; i++) { h = dp_hash(h, &cands[i].algo, sizeof(cands[i].algo)); }
        if (!dp_agree(dp, h, "cuBLASLt's algorithms for a matmul (every process needs the same GPU and library)")) {
            exit(EXIT_FAILURE);
        }
    }
    if (n == 0) { return choice; }
    // with one candidate nothing is timed, as everywhere (so the CPU runtime's one algorithm decides the same
    // in every process): the pair is weighed against the epilogue's candidates when there are several
    const int pair = n > 1 && lt_has_own_epilogue(c);
    double times[LT_TUNE_MAX_ALGOS + 3]; // the candidates'; then the pair's: its matmul, own kernel, matmul's first
    lt_time_candidates(c, cands, n, times, 0);
    if (pair) { lt_pair_ms(c, &times[n], &times[n + 1], &times[n + 2]); }
    if (dp != NULL && !dp->alone && !dp_sum_doubles(dp, times, n + 3 * pair, "the matmul tuning's times")) {
        exit(EXIT_FAILURE);
    }
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (times[i] < times[best]) { best = i; }
    }
    choice.algo = cands[best].algo;
    choice.place = best;
    choice.first_ms = times[0];
    choice.chosen_ms = times[best];
    // the matmul without the epilogue, then our own kernel
    if (pair && times[n] + times[n + 1] < (1.0 - LT_PAIR_MIN_GAIN) * times[best]) {
        choice.own_epilogue = 1;
        choice.chosen_ms = times[n + 2] + times[n + 1]; // the matmul's own configuration counts its tuning's saving
    }
    g_lt_tuner.timed += n > 1;
    g_lt_tuner.not_first += best > 0 && !choice.own_epilogue;
    return choice;
}

// The choice for configuration `key` (matmul_lt's `call`): decided when it is new, or again in the
// tuning window when the heuristic alone decided it before (step 0's validation)
static LtChoice* lt_choice(const LtCall* call, const LtKey* key) {
    LtChoice* choice = NULL;
    for (size_t i = 0; i < g_lt_cache.size(); i++) {
        if (memcmp(&g_lt_cache[i].first, key, sizeof(*key)) == 0) { choice = &g_lt_cache[i].second; break; }
    }
    if (choice == NULL || (g_lt_tuner.open && !choice->in_pass)) {
        const LtChoice decided = lt_decide(call, key);
        if (choice == NULL) {
            g_lt_cache.push_back(std::make_pair(*key, decided));
            choice = &g_lt_cache.back().second;
        } else {
            *choice = decided;
        }
    }
    if (g_lt_tuner.open) { choice->pass_calls++; }
    return choice;
}

// ----------------------------------------------------------------------------
// the matmul tuning's pass and its file (see matmul_lt's tuner)

// lt_algos.bin (dev/FORMATS.md): a header, then one entry per configuration the tuning pass decided
#define LT_ALGOS_MAGIC "GPT2LTAL"
#define LT_ALGOS_VERSION 1
typedef struct {
    char magic[8];             // LT_ALGOS_MAGIC
    int32_t version, count;    // LT_ALGOS_VERSION; entries
    char gpu[256];             // cudaDeviceProp.name
    uint64_t cublaslt_version; // cublasLtGetVersion()
    int32_t key_fields, algo_bytes; // 20, sizeof(cublasLtMatmulAlgo_t): a build whose sizes differ re-tunes
} LtAlgosHeader;
typedef struct { LtKey key; cublasLtMatmulAlgo_t algo; } LtAlgosEntry;
static_assert(sizeof(LtAlgosHeader) == 288 && sizeof(LtAlgosEntry) == 160 + sizeof(cublasLtMatmulAlgo_t),
              "lt_algos.bin's layout (dev/FORMATS.md)");

static void lt_algos_header(LtAlgosHeader* h, int count) {
    memset(h, 0, sizeof(*h));
    memcpy(h->magic, LT_ALGOS_MAGIC, 8);
    h->version = LT_ALGOS_VERSION;
    h->count = count;
    int device = 0;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    snprintf(h->gpu, sizeof(h->gpu), "%s", prop.name);
    h->cublaslt_version = (uint64_t)cublasLtGetVersion();
    h->key_fields = (int32_t)(sizeof(LtKey) / sizeof(long long));
    h->algo_bytes = (int32_t)sizeof(cublasLtMatmulAlgo_t);
}

// Reads a resumed run's choices into g_lt_tuner.saved. Returns 1 when read; 0 when they were made on
// another GPU or cuBLASLt (the tuning pass then times everything again), said in `note`; -1 with a
// one-line error when the file is damaged.
static int lt_algos_read(const char* path, char* note, size_t note_size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(note, note_size, "%s: cannot read it (%s)", path, strerror(errno));
        return -1;
    }
    LtAlgosHeader h, mine;
    int ok = fread(&h, sizeof(h), 1, f) == 1 && memcmp(h.magic, LT_ALGOS_MAGIC, 8) == 0 && h.version == LT_ALGOS_VERSION &&
             h.count >= 0 && h.count <= 100000;
    lt_algos_header(&mine, h.count);
    const int same_setup = ok && memcmp(h.gpu, mine.gpu, sizeof(h.gpu)) == 0 && h.cublaslt_version == mine.cublaslt_version &&
                           h.key_fields == mine.key_fields && h.algo_bytes == mine.algo_bytes;
    std::vector<LtAlgosEntry> entries(ok ? (size_t)h.count : 0);
    if (ok && same_setup) {
        ok = entries.empty() || fread(entries.data(), sizeof(LtAlgosEntry), entries.size(), f) == entries.size();
        ok = ok && fgetc(f) == EOF; // nothing after the last entry
    }
    fclose(f);
    if (!ok) {
        snprintf(note, note_size, "%s is not a complete lt_algos.bin of version %d (HINT: delete it: the resumed run "
                 "then tunes anew)", path, LT_ALGOS_VERSION);
        return -1;
    }
    if (!same_setup) {
        h.gpu[sizeof(h.gpu) - 1] = '\0';
        snprintf(note, note_size, "%s was tuned on %s with cuBLASLt %llu; this is %s with cuBLASLt %llu: re-tuning (the "
                 "resumed run's matmuls may round differently from the run it continues)", path, h.gpu,
                 (unsigned long long)h.cublaslt_version, mine.gpu, (unsigned long long)mine.cublaslt_version);
        return 0;
    }
    g_lt_tuner.saved.clear();
    for (size_t i = 0; i < entries.size(); i++) { g_lt_tuner.saved.push_back(std::make_pair(entries[i].key, entries[i].algo)); }
    snprintf(note, note_size, "%d choices read from %s", h.count, path);
    return 1;
}

// the choices the tuning pass made (or read), to path, through a temporary name
static void lt_algos_write(const char* path) {
    std::vector<LtAlgosEntry> entries;
    for (size_t i = 0; i < g_lt_cache.size(); i++) {
        if (!g_lt_cache[i].second.in_pass || !g_lt_cache[i].second.found) { continue; }
        LtAlgosEntry e;
        memset(&e, 0, sizeof(e)); // an algorithm of zero bytes: the pair won (own_epilogue)
        e.key = g_lt_cache[i].first;
        if (!g_lt_cache[i].second.own_epilogue) { e.algo = g_lt_cache[i].second.algo; }
        entries.push_back(e);
    }
    LtAlgosHeader h;
    lt_algos_header(&h, (int)entries.size());
    char tmp[4200];
    FILE* f = open_tmp_for(path, tmp, sizeof(tmp));
    fwrite(&h, sizeof(h), 1, f);
    if (!entries.empty()) { fwrite(entries.data(), sizeof(LtAlgosEntry), entries.size(), f); }
    close_and_rename(f, tmp, path);
}

// --lt_tune 1, before the first step: a resume reads -o's lt_algos.bin, so that its matmuls are the
// run's own from its first call (its validation's too); every process reads it alike.
static void lt_tune_prepare(const TrainArgs* a, DataParallel* dp) {
    g_lt_tuner.saved.clear();
    g_lt_tuner.dp = dp;
    g_lt_tuner.timed = g_lt_tuner.read = g_lt_tuner.stale = g_lt_tuner.rejected = g_lt_tuner.not_first = 0;
    g_lt_tuner.seconds = 0.0;
    if (!a->resuming || !a->lt_tune) { return; }
    char path[4096], note[8192];
    snprintf(path, sizeof(path), "%s/lt_algos.bin", a->output_dir);
    if (!file_exists(path)) {
        if (dp->rank == 0) { printf("matmuls: no %s (a run with --lt_tune 0, or from before tuning): tuning anew\n", path); }
        return;
    }
    const int r = lt_algos_read(path, note, sizeof(note));
    if (r < 0) {
        fprintf(stderr, "error: %s\n", note);
        exit(EXIT_FAILURE);
    }
    if (dp->rank == 0) { printf("matmuls: %s\n", note); }
}

// After the tuning window (the run's first micro-step, every process's): one line on what was timed or
// read, in how long, and the predicted saving; rank 0 writes the choices to -o's lt_algos.bin.
static void lt_tune_report(const TrainArgs* a, const DataParallel* dp, FILE* logf, double seconds) {
    int configs = 0, candidates_max = 0, pairs = 0;
    double saving_ms = 0.0; // from the timed medians: a micro-step's calls of each configuration, first minus chosen
    for (size_t i = 0; i < g_lt_cache.size(); i++) {
        const LtChoice* c = &g_lt_cache[i].second;
        if (!c->in_pass) { continue; }
        configs++;
        pairs += c->own_epilogue;
        candidates_max = c->candidates > candidates_max ? c->candidates : candidates_max;
        saving_ms += c->pass_calls * (c->first_ms - c->chosen_ms) / dp->world; // the processes' sum: one's mean
    }
    char line[1024];
    snprintf(line, sizeof(line), "matmuls: %d configurations, %d timed (up to %d of cuBLASLt's candidates, the median of "
             "%d launches), %d read from lt_algos.bin%s, in the first micro-step (%.2f s of its %.2f s): %d not cuBLASLt's "
             "first choice, %d with the epilogue's work faster in our own kernel after the matmul, %d candidates rejected "
             "for their results; predicted %.3f ms less a micro-step", configs, g_lt_tuner.timed, candidates_max, LT_TUNE_RUNS,
             g_lt_tuner.read, g_lt_tuner.stale > 0 ? " (some no longer offered: timed)" : "", g_lt_tuner.seconds, seconds,
             g_lt_tuner.not_first, pairs, g_lt_tuner.rejected, saving_ms);
    if (dp->rank == 0) {
        printf("%s\n", line);
        logf_line(logf, line);
        if (a->output_dir != NULL) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/lt_algos.bin", a->output_dir);
            lt_algos_write(path);
        }
    }
}

#endif // DEV_TRAINER_MATMUL_TUNING_CUH
