/*
dev/trainer/kv_cache.cuh: the CUDA trainer's KV-cached generation, included by train_gpt2.cu after
the model's forward pass, whose layer launchers the decode step runs one token at a time.
*/
#ifndef DEV_TRAINER_KV_CACHE_CUH
#define DEV_TRAINER_KV_CACHE_CUH

// ----------------------------------------------------------------------------
// KV-cached generation: one forward pass per new token against a cache of every earlier token's k
// and v per layer (dev/cpu/train_gpt2_cpu.cpp has the same API and is the reference), for a batch
// of sequences decoded together (--num_samples): a step feeds one token per sequence, all at the
// same position, so each layer's matmuls read the weights once for the whole batch.
//
// What a layer caches is what attention reads as k and v, as qkv_layout() says (qkv_role_view):
// a column range of the fused projection, or x itself (k_identity, v_identity); a tensor k and v
// share (kv_shared, qkv_shared) is stored once; with GQA only the Hkv heads exist. q is never cached.
// A row of layer l is [k | v] (or the one shared tensor) in floatX, as the training forward's q/k/v:
// qkv_kv_cache_layer_channels() values, so the cache per token and sequence is
// qkv_kv_cache_bytes_per_token() x sizeof(floatX) / 2 bytes. The decode step is gpt2_forward_staged
// at N = batch rows with the same launchers and fusions (qkv_forward with the residual query,
// matmul_lt, residual_layernorm_forward, the GELU epilogue), its attention attention_decode_kernel
// below; its scratch lives in the cache, so sampling leaves the model's training activations alone.
// Each row of a step is computed as it would be alone (no kernel here mixes rows), which is what
// makes a batched sample the single-sequence sample of its seed (tested on the CPU runtime).

#define DECODE_THREADS 256
// the decode kernel keeps one fp32 score per cached position in shared memory, without an opt-in
#define DECODE_MAX_SMEM_BYTES (48 * 1024)

// Attention of the new token at position t of sequence b (blockIdx.y) for query head h (blockIdx.x),
// against that sequence's cached keys and values 0..t of its kv head kvh = h / (H / Hkv):
//   S_j = scale * q_h . k_j,  P_j = exp(S_j - max S),  out_h = (sum_j P_j v_j) / (sum_j P_j)
// in fp32 from the floatX cache, as attention_decode_forward of the CPU trainer (there in double).
// q: (batch, q_stride) rows, head h at h * hd; k, v: sequence b's (t + 1, Hkv * hd) views start at
// b * seq_stride, row stride kv_stride (one cache row); out: (batch, H * hd).
// Work per layer, token and sequence: 4 * H * (t + 1) * hd FLOPs against 2 * (t + 1) * Hkv * hd *
// sizeof(floatX) bytes of cache (once when k and v are one tensor; the H / Hkv heads of a group read
// the same rows, from L2): about 1 FLOP per byte, memory-bound. At d12, bf16, t = 1024: 3 MB per
// layer and sequence (kv_shared 1.5 MB), 0.65 us at 4.8 TB/s; at batch 64 the cache is 42 us of a
// layer's step at the HBM rate. Predicted far slower, latency-bound (a dependent load per key and
// warp): its lab, dev/cuda/attention_decode.cu, has the numbers and the next version.
// Deterministic: fixed reduction orders (warp_sum / block reductions, group partials added in order).
__global__ void __launch_bounds__(DECODE_THREADS) attention_decode_kernel(floatX* out, const floatX* q, int q_stride,
                                                                          const floatX* k, const floatX* v, int kv_stride,
                                                                          size_t seq_stride, int t, int H, int Hkv, int hd,
                                                                          float scale) {
    extern __shared__ float s_mem[];
    const int n = t + 1;
    float* s_p = s_mem;        // (n)                 scores S, then probabilities P (unnormalised)
    float* s_q = s_p + n;      // (hd)                the query head
    float* s_part = s_q + hd;  // (groups, hd)        partial sums of P v, groups = blockDim.x / hd (<= blockDim.x floats)
    __shared__ float s_red[32];
    const int h = blockIdx.x, b = blockIdx.y, kvh = h / (H / Hkv);
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, nwarps = blockDim.x / 32;
    const floatX* k_h = k + (size_t)b * seq_stride + (size_t)kvh * hd;
    const floatX* v_h = v + (size_t)b * seq_stride + (size_t)kvh * hd;
    const floatX* q_h = q + (size_t)b * q_stride + (size_t)h * hd;
    floatX* out_h = out + ((size_t)b * H + h) * hd;
    for (int i = tid; i < hd; i += blockDim.x) { s_q[i] = x2f(q_h[i]); }
    __syncthreads(); // every warp reads all of s_q
    // S_j = scale * q . k_j: a warp per key, lanes over the head's channels
    for (int j = warp; j < n; j += nwarps) {
        const floatX* k_j = k_h + (size_t)j * kv_stride;
        float dot = 0.0f;
        for (int i = lane; i < hd; i += 32) { dot += s_q[i] * x2f(k_j[i]); }
        dot = warp_sum(dot);
        if (lane == 0) { s_p[j] = dot * scale; }
    }
    __syncthreads(); // every score is written before any thread reads them for the max
    float m = -INFINITY;
    for (int j = tid; j < n; j += blockDim.x) { m = fmaxf(m, s_p[j]); }
    m = block_max(m, s_red);
    // P_j = exp(S_j - m), l = sum_j P_j; each thread rewrites only the scores it reads
    float l = 0.0f;
    for (int j = tid; j < n; j += blockDim.x) {
        const float p = expf(s_p[j] - m);
        s_p[j] = p;
        l += p;
    }
    l = block_sum(l, s_red); // its __syncthreads also make every P_j visible to the whole block
    // O = sum_j P_j v_j: thread (g, i) sums keys j = g, g + groups, ... of channel i (a group reads
    // whole rows, coalesced); then the group partials are added in group order. A head wider than
    // the block: each thread sums all keys for channels i = tid, tid + blockDim.x, ...
    if (hd > (int)blockDim.x) {
        for (int i = tid; i < hd; i += blockDim.x) {
            float acc = 0.0f;
            for (int j = 0; j < n; j++) { acc += s_p[j] * x2f(v_h[(size_t)j * kv_stride + i]); }
            out_h[i] = f2x(acc / l);
        }
        return;
    }
    const int groups = blockDim.x / hd;
    const int g = tid / hd, i = tid % hd;
    if (g < groups) {
        float acc = 0.0f;
        for (int j = g; j < n; j += groups) { acc += s_p[j] * x2f(v_h[(size_t)j * kv_stride + i]); }
        s_part[g * hd + i] = acc;
    }
    __syncthreads(); // the partials of every group are in shared memory
    if (tid < hd) {
        float o = 0.0f;
        for (int gg = 0; gg < groups; gg++) { o += s_part[gg * hd + tid]; }
        out_h[tid] = f2x(o / l);
    }
}

// dynamic shared memory of attention_decode_kernel for n cached positions: scores, q, partials
static size_t attention_decode_smem_bytes(int n, int hd) {
    return ((size_t)n + (size_t)hd + DECODE_THREADS) * sizeof(float);
}

// out (batch, H * hd) for the query rows q (batch, q_stride) at position t against each sequence's
// k, v (t + 1, Hkv * hd) views (row stride kv_stride, sequence b's at b * seq_stride);
// kv_cache_build checked that the shared memory and the batch fit the grid
static void attention_decode_forward(floatX* out, const floatX* q, int q_stride, const floatX* k, const floatX* v,
                                     int kv_stride, size_t seq_stride, int batch, int t, int H, int Hkv, int hd,
                                     float scale) {
    const dim3 grid(H, batch);
    attention_decode_kernel<<<grid, DECODE_THREADS, attention_decode_smem_bytes(t + 1, hd)>>>(
        out, q, q_stride, k, v, kv_stride, seq_stride, t, H, Hkv, hd, scale);
    launchCheck();
}

// dst row of sequence b (at b * seq_stride) = src row b (at b * src_stride), `channels` elements
// each, for b < batch: a step's new k or v into row t of every sequence's cache
__global__ void kv_cache_append_kernel(floatX* dst, size_t seq_stride, const floatX* src, int src_stride, int channels,
                                       int batch) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)batch * channels) { return; }
    const size_t b = idx / channels, i = idx % channels;
    dst[b * seq_stride + i] = src[b * src_stride + i];
}

static void kv_cache_append(floatX* dst, size_t seq_stride, const floatX* src, int src_stride, int channels, int batch) {
    const int threads = 256;
    const size_t n = (size_t)batch * channels;
    kv_cache_append_kernel<<<(unsigned)((n + threads - 1) / threads), threads>>>(dst, seq_stride, src, src_stride,
                                                                              channels, batch);
    launchCheck();
}

typedef struct {
    GPT2Config config;     // the model it was built for (gpt2_decode_step refuses another)
    int batch;             // sequences decoded together: every step feeds one token to each
    int max_T;             // positions it holds per sequence
    int len;               // positions filled: the next decode step runs at position len
    int row;               // elements of one cached row of one layer
    int k_offset;          // where k starts in a row
    int v_offset;          // where v starts in a row (== k_offset when k and v are one tensor)
    floatX* kv;            // (L, batch, max_T, row): layer l's sequence b at kv + (l * batch + b) * max_T * row
    size_t kv_bytes;       // L * batch * max_T * row * sizeof(floatX)
    // a step's activations, the decode step's scratch (gpt2_forward_staged's tensors at B = batch, T = 1)
    int* token_d;          // (batch) the input tokens
    floatX* residual;      // (batch, C) the residual stream into a layer (encoded, then each layer's residual3)
    floatX* residual2;     // (batch, C)
    floatX* ln1;           // (batch, C) x
    floatX* qkv;           // (batch, width)
    QResActs qres;         // the residual query's rows (statistics in stats); NULL where the layout has none
    floatX* atty;          // (batch, C)
    floatX* proj_out;      // (batch, C)
    floatX* ln2;           // (batch, C)
    floatX* fch;           // (batch, M)
    floatX* fch_gelu;      // (batch, M)
    floatX* lnf;           // (batch, C)
    floatX* logits;        // (batch, Vp)
    float* stats;          // (2, batch) mean, rstd of the norm just run (not needed afterwards)
    void* memory;          // the one device allocation: kv, then the scratch
    void* logits_host;     // (batch, Vp) floatX, the logits copied back
} KVCache;

// A cache for `batch` sequences of max_T positions each (at most the model's max_seq_len, the rows of
// wpe) of a built model. A request that cannot fit stops with one line naming the flag to lower.
static void kv_cache_build(KVCache* cache, const GPT2* model, int max_T, int batch) {
    memset(cache, 0, sizeof(*cache));
    const GPT2Config* c = &model->config;
    const int C = c->channels, M = c->mlp_hidden, Vp = c->padded_vocab_size, L = c->num_layers;
    const int hd = qkv_head_dim(c), W = model->layout.width;
    if (max_T < 1 || max_T > c->max_seq_len) {
        fprintf(stderr, "error: kv cache: %d positions requested, expected 1..max_seq_len=%d\n", max_T, c->max_seq_len);
        exit(EXIT_FAILURE);
    }
    if (batch < 1 || batch > GENERATE_MAX_BATCH) {
        fprintf(stderr, "error: kv cache: %d sequences requested, expected 1..%d (HINT: --num_samples)\n", batch,
                GENERATE_MAX_BATCH);
        exit(EXIT_FAILURE);
    }
    if (attention_decode_smem_bytes(max_T, hd) > DECODE_MAX_SMEM_BYTES) {
        fprintf(stderr, "error: kv cache: decode attention keeps one score per position in %d bytes of shared memory: "
                "%d positions of head size %d do not fit (HINT: sample fewer tokens, -g)\n", DECODE_MAX_SMEM_BYTES,
                max_T, hd);
        exit(EXIT_FAILURE);
    }
    // the row layout from the scheme's layout: v after k, or on top of it when they are one tensor
    const QKVLayout* lay = &model->layout;
    cache->config = *c;
    cache->batch = batch;
    cache->max_T = max_T;
    cache->k_offset = 0;
    cache->v_offset = qkv_roles_share(lay->k, lay->v) ? cache->k_offset : cache->k_offset + lay->k.channels;
    cache->row = cache->v_offset + lay->v.channels;
    cache->kv_bytes = (size_t)L * batch * max_T * cache->row * sizeof(floatX);
    const size_t qres = qkv_has_residual_query(lay);
    const size_t X = sizeof(floatX), n = (size_t)batch;
    struct { void** slot; size_t bytes; } parts[] = {
        {(void**)&cache->kv, cache->kv_bytes}, {(void**)&cache->token_d, n * sizeof(int)},
        {(void**)&cache->residual, n * C * X}, {(void**)&cache->residual2, n * C * X}, {(void**)&cache->ln1, n * C * X},
        {(void**)&cache->qkv, n * W * X},
        {(void**)&cache->qres.r, qres * n * C * X}, {(void**)&cache->qres.h, qres * n * (C / 2) * X},
        {(void**)&cache->qres.hg, qres * n * (C / 2) * X}, {(void**)&cache->qres.u, qres * n * C * X},
        {(void**)&cache->qres.f, qres * n * C * X}, {(void**)&cache->qres.q, qres * n * C * X},
        {(void**)&cache->atty, n * C * X}, {(void**)&cache->proj_out, n * C * X}, {(void**)&cache->ln2, n * C * X},
        {(void**)&cache->fch, n * M * X}, {(void**)&cache->fch_gelu, n * M * X}, {(void**)&cache->lnf, n * C * X},
        {(void**)&cache->logits, n * Vp * X}, {(void**)&cache->stats, 2 * n * sizeof(float)},
    };
    const int nparts = (int)(sizeof(parts) / sizeof(parts[0]));
    size_t total = 0;
    for (int i = 0; i < nparts; i++) { total += qkv_round_up(parts[i].bytes, TENSOR_ALIGN_BYTES); }
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    if (total > free_b) { // before device_malloc, whose hint is about training's -b
        fprintf(stderr, "error: kv cache: %d sequences x %d positions need %.1f MiB of GPU memory, %.1f MiB are free "
                "(HINT: lower --num_samples or --generate)\n", batch, max_T, total / 1048576.0, free_b / 1048576.0);
        exit(EXIT_FAILURE);
    }
    cache->memory = device_malloc(total, "kv cache");
    cudaCheck(cudaMemset(cache->memory, 0, total));
    size_t off = 0;
    for (int i = 0; i < nparts; i++) {
        *parts[i].slot = parts[i].bytes > 0 ? (char*)cache->memory + off : NULL;
        off += qkv_round_up(parts[i].bytes, TENSOR_ALIGN_BYTES);
    }
    // the norms' statistics are not needed afterwards: every norm writes the same (2, batch) floats
    cache->qres.rrms = cache->qres.rstd = cache->stats + batch;
    cache->qres.mean = cache->stats;
    cache->logits_host = host_malloc(n * Vp * X, "decode logits");
}

// empties the cache (the next step runs at position 0), keeping its memory. `unused`: the trainer
// itself does not call it (test_gpt2.cu does), and nvcc warns otherwise
static __attribute__((unused)) void kv_cache_reset(KVCache* cache) { cache->len = 0; }

static void kv_cache_free(KVCache* cache) {
    if (cache->memory != NULL) { cudaCheck(cudaFree(cache->memory)); }
    free(cache->logits_host);
    memset(cache, 0, sizeof(*cache));
}

// the k/v bytes allocated per position of one sequence (not the scratch):
// qkv_kv_cache_bytes_per_token x sizeof(floatX) / 2
static size_t kv_cache_bytes_per_token(const KVCache* cache) {
    return cache->max_T > 0 ? cache->kv_bytes / ((size_t)cache->max_T * cache->batch) : 0;
}

// One step at position cache->len: tokens[b] (batch of them) is sequence b's next token. Appends
// their k and v to every layer's cache and copies the logits over the V real tokens into
// logits_host (batch, V) (waits for the GPU); then len++. A token outside the vocabulary, a full
// cache or a cache of another model stop with one line.
static void gpt2_decode_step(GPT2* model, KVCache* cache, const int* tokens, float* logits_host) {
    const GPT2Config* c = &model->config;
    const int V = c->vocab_size, Vp = c->padded_vocab_size, L = c->num_layers;
    const int C = c->channels, M = c->mlp_hidden, n = cache->batch;
    const int t = cache->len;
    if (cache->memory == NULL || memcmp(&cache->config, c, sizeof(*c)) != 0) {
        fprintf(stderr, "error: internal: decode step with a kv cache not built for this model (kv_cache_build)\n");
        exit(EXIT_FAILURE);
    }
    for (int b = 0; b < n; b++) {
        if (tokens[b] < 0 || tokens[b] >= V) {
            fprintf(stderr, "error: decode step: token %d (sequence %d) is outside the model's vocabulary [0, %d)\n",
                    tokens[b], b, V);
            exit(EXIT_FAILURE);
        }
    }
    if (t >= cache->max_T) {
        fprintf(stderr, "error: decode step: kv cache full: position %d, the cache holds %d positions "
                "(HINT: kv_cache_reset, or build it with more)\n", t, cache->max_T);
        exit(EXIT_FAILURE);
    }
    floatX* const* p = model->params;
    const size_t CC = (size_t)C * C, MC = (size_t)M * C;
    const AttnShape shape = attn_shape_make(c, 1, 1, 0); // the layout, heads and scale
    float* mean = cache->stats;
    float* rstd = cache->stats + n;
    const size_t seq_stride = (size_t)cache->max_T * cache->row; // one sequence's rows of one layer
    cudaCheck(cudaMemcpyAsync(cache->token_d, tokens, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, 0));
    // position t's embedding for every sequence: the encoder at B = batch, T = 1 with wpe's row t
    encoder_forward(cache->residual, cache->token_d, p[PARAM_WTE], p[PARAM_WPE] + (size_t)t * C, n, 1, C);
    layernorm_forward(cache->ln1, mean, rstd, cache->residual, p[PARAM_LN1W], p[PARAM_LN1B], n, C);
    for (int l = 0; l < L; l++) {
        const QKVSources<const floatX> src = qkv_forward(cache->qkv, &cache->qres, cache->ln1, &shape.layout, p, l, n, C);
        // k and v of the new tokens, from where the layout puts them, into row t of each sequence
        // (a shared tensor once)
        floatX* layer_kv = cache->kv + (size_t)l * n * seq_stride;
        floatX* row_t = layer_kv + (size_t)t * cache->row;
        const AttnRows k_new = qkv_role_view(&shape.layout, 1, shape.hd, src);
        kv_cache_append(row_t + cache->k_offset, seq_stride, k_new.ptr, k_new.stride, shape.layout.k.channels, n);
        if (cache->v_offset != cache->k_offset) {
            const AttnRows v_new = qkv_role_view(&shape.layout, 2, shape.hd, src);
            kv_cache_append(row_t + cache->v_offset, seq_stride, v_new.ptr, v_new.stride, shape.layout.v.channels, n);
        }
        const AttnRows q_new = qkv_role_view(&shape.layout, 0, shape.hd, src);
        attention_decode_forward(cache->atty, q_new.ptr, q_new.stride, layer_kv + cache->k_offset,
                                 layer_kv + cache->v_offset, cache->row, seq_stride, n, t, shape.H, shape.Hkv, shape.hd,
                                 shape.scale);
        matmul_forward(cache->proj_out, cache->atty, lslice(p[PARAM_ATTPROJW], l, CC), lslice(p[PARAM_ATTPROJB], l, C), n, C, C);
        residual_layernorm_forward(cache->residual2, cache->ln2, mean, rstd, cache->residual, cache->proj_out,
                                   lslice(p[PARAM_LN2W], l, C), lslice(p[PARAM_LN2B], l, C), n, C);
        matmul_forward_gelu(cache->fch_gelu, cache->fch, cache->ln2, lslice(p[PARAM_FCW], l, MC), lslice(p[PARAM_FCB], l, M),
                            n, C, M);
        matmul_forward(cache->proj_out, cache->fch_gelu, lslice(p[PARAM_FCPROJW], l, MC), lslice(p[PARAM_FCPROJB], l, C), n, M, C);
        // residual3 into `residual` (this layer's input is no longer needed), then the next LayerNorm
        const int last = l + 1 == L;
        residual_layernorm_forward(cache->residual, last ? cache->lnf : cache->ln1, mean, rstd, cache->residual2,
                                   cache->proj_out, last ? p[PARAM_LNFW] : lslice(p[PARAM_LN1W], l + 1, C),
                                   last ? p[PARAM_LNFB] : lslice(p[PARAM_LN1B], l + 1, C), n, C);
    }
    const floatX* head = c->tied_head ? p[PARAM_WTE] : p[PARAM_LM_HEAD];
    matmul_forward(cache->logits, cache->lnf, head, NULL, n, C, Vp); // (batch, Vp), the padded columns are 0
    const size_t row_bytes = (size_t)Vp * sizeof(floatX);
    cudaCheck(cudaMemcpy(cache->logits_host, cache->logits, (size_t)n * row_bytes, cudaMemcpyDeviceToHost));
    for (int b = 0; b < n; b++) {
        host_x_to_floats(logits_host + (size_t)b * V, (const char*)cache->logits_host + (size_t)b * row_bytes, (size_t)V);
    }
    cache->len = t + 1;
}

// the decode step as generate_tokens (dev/trainer/generate.h) calls it, in the CPU trainer's form:
// 1, or 0 with msg. This one stops the run on bad input itself, so it returns 1.
static int gpt2_decode_step(GPT2* model, KVCache* cache, const int* tokens, float* logits_host, char* msg, size_t msg_size) {
    (void)msg, (void)msg_size;
    gpt2_decode_step(model, cache, tokens, logits_host);
    return 1;
}

#endif // DEV_TRAINER_KV_CACHE_CUH
