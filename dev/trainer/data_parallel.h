/*
data_parallel.h: data parallelism for both trainers: P processes, each with the whole model and
one device (a GPU, or the CPU), train the run that one process would train with the same global
batch. This file is the decomposition they share (which process trains which batch, who owns which
part of AdamW's state, the order of the reductions, the checks); the transport is an existing
engine behind one small interface: MPI for the CPU trainer (built by make
build/train_gpt2_cpu_mpi_<scheme>), NCCL for the CUDA trainer. A build without either has the
world-of-one backend below, whose collectives do nothing, so a single-process run takes exactly
the path it took before data parallelism existed.

The decomposition (N parameters, P processes of ranks 0..P-1, A micro-batches per step):
  - Micro-batches: a step is A = total_batch / (B*T) micro-batches (-d), in the data loader's
    order, which every rank walks: rank r trains micro-batch i when i % P == r and skips the others
    (dataloader_skip_batch). So A must be a multiple of P, and every rank trains A / P of them.
  - Gradients: each rank sums its micro-batches' gradients (the backward's +=); the sums are summed
    over the ranks (an all-reduce; with ZeRO-1 a reduce-scatter, after which rank r holds the sum of
    its shard only) and scaled by 1/A: the mean over the step's micro-batches, as one process takes it.
  - The loss: each rank's sum of its micro-batches' mean losses, summed over the ranks in double, / A.
  - The gradient norm: of the summed gradient. -z 0: every rank has all of it and takes it whole;
    -z 1: each rank's shard's sum of squares (the CPU trainer's in double, the CUDA trainer's in float
    on its GPU), summed over the ranks.
  - AdamW: -z 0: every rank updates every parameter from the same gradient, so the ranks' parameters
    stay identical bit for bit. -z 1 (ZeRO-1, llm.c's -z 1): rank r keeps AdamW's m and v for its
    shard only and updates only those parameters, then the parameters are all-gathered.
  - Shards: chunk = ceil(N / P) (the CUDA trainer rounds it up to 128 parameters, its tensors'
    alignment, for its 16-byte loads); rank r owns [r * chunk, min(N, (r + 1) * chunk)), possibly
    empty at the end.
  - Validation: batch i of a validation is rank i % P's; the loss sums are summed over the ranks.
  - Checkpoints: rank 0 writes the files one process writes (dev/FORMATS.md), whole: with ZeRO-1 it
    first gathers every rank's m and v (and master weights) into its host memory. The state records
    the global A (grad_accum_steps), so any number of processes resumes from it, each taking its
    shard; a resume refuses only what one process refuses (another B, T or -d) and a -d that the
    new number of processes cannot split.
  - Agreement: every rank must run the same command: right after the checks the ranks compare a
    hash of the run (the model's shape and parameters, B, T, -d, steps, schedule) and stop with one
    line naming the difference. Decisions stay common: the stop signal (SIGINT/SIGTERM/SIGHUP) is OR-ed over
    the ranks at the top of each step, and the bad-step guard sees the global loss and norm.
  - Output: rank 0 prints, writes main.log, samples and checkpoints; the other ranks print only errors
    (those of the checks before training name their rank).
  - Ending: the checks' outcome is agreed before anything trains (dp_all_ok: a rank that failed its
    checks stops them all, each process exiting normally); a decision every rank made together (a stop
    signal, the bad-step guard, an agreement refused) ends every rank normally too. An error of one
    rank alone (a file it cannot read mid-run) ends the job through the backend (MPI_Abort), since the
    others may be waiting in a collective.
  - Timeouts: every collective waits at most --collective_timeout seconds (default 600) for the other
    ranks; then the rank prints which collective of which step timed out and ends the job (a rank that
    died or hangs never leaves the others waiting forever).

What differs from one process is the order of some sums: one process adds micro-batch 1's gradient
onto micro-batch 0's inside the backward pass, P processes add finished per-rank sums; the norm's and
the losses' double sums are split the same way. Float addition is not associative, so the runs agree
to float rounding, not bit for bit (dev/test/test_mpi.sh measures it).
*/
#ifndef DATA_PARALLEL_H
#define DATA_PARALLEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef DP_MPI
#define OMPI_SKIP_MPICXX 1  // MPI's C interface only: the C++ bindings are deprecated and warn
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif
#ifdef DP_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "dev/trainer/data_parallel.h needs NCCL 2.14 or later (non-blocking communicators): build with NO_NCCL=1, or NCCL_HOME=DIR"
#endif
#endif

typedef enum { DP_F32, DP_BF16, DP_F64, DP_I32, DP_U64 } DPType;
typedef enum { DP_SUM, DP_MAX, DP_MIN } DPOp;

static inline size_t dp_type_size(DPType t) {
    return t == DP_BF16 ? 2 : (t == DP_F32 || t == DP_I32) ? 4 : 8;
}

typedef struct DataParallel DataParallel;

// The transport. Every call is collective: each rank makes the same calls in the same order. `what`
// names the call in a timeout's message ("the gradients' all-reduce"). Buffers of DP_F32 and
// DP_BF16 live where the trainer keeps its tensors (the GPU for NCCL); DP_F64, DP_I32 and DP_U64
// are host scalars. Each returns 1, or 0 after printing an error (then the caller stops the job).
typedef struct {
    const char* name;
    int (*allreduce)(DataParallel* dp, void* buf, size_t n, DPType t, DPOp op, const char* what);
    // buf holds all N values of this rank; afterwards buf[lo, hi) holds their sum over the ranks
    int (*reduce_scatter)(DataParallel* dp, void* buf, DPType t, const char* what);
    // buf[lo, hi) of every rank into buf of every rank
    int (*allgather)(DataParallel* dp, void* buf, DPType t, const char* what);
    // rank r's shard (hi - lo values, where the trainer keeps its tensors) into full[lo, hi), host memory
    // of rank 0 (full is only written on rank 0)
    int (*gather)(DataParallel* dp, const void* shard, void* full, DPType t, const char* what);
    int (*barrier)(DataParallel* dp, const char* what);
    void (*abort_job)(DataParallel* dp);
    void (*finalize)(DataParallel* dp);
} DPBackend;

struct DataParallel {
    int world, rank;        // processes, and this one's index
    int zero;               // 1: ZeRO-1, AdamW's state sharded (only when world > 1)
    size_t num_params;      // N
    size_t chunk;           // ceil(N / world), rounded up to the trainer's alignment (dp_set_params)
    size_t lo, hi;          // this rank's shard of the parameters: AdamW's state under ZeRO-1
    double timeout_s;       // the longest a collective waits for the other ranks
    int step;               // the step being trained, for messages (-1: before the first)
    int agreed_exit;        // 1 when the run ends by a decision every rank made (dp_all_ok, a stop, the guard)
    int alone;              // 1: the world-of-one backend, whose collectives the helpers below skip (a transport's
                            // world of one, mpirun -np 1 or the CUDA trainer's -pi fs -pn 1, goes through them)
    const DPBackend* backend;
    void* impl;             // the backend's own state
};

// the shard of `rank`: [rank * chunk, (rank + 1) * chunk) within [0, n); it may be empty for the last ranks
static inline void dp_shard_range(size_t n, size_t chunk, int rank, size_t* lo, size_t* hi) {
    *lo = chunk * (size_t)rank < n ? chunk * (size_t)rank : n;
    *hi = *lo + chunk < n ? *lo + chunk : n;
}

// sets the parameter count and the shards; zero: -z. align: every shard starts at a multiple of it
// (chunk = ceil(N / P) rounded up to it): 1 for the CPU trainer; the CUDA trainer's kernels read 16
// bytes at a time from where a shard starts.
static inline void dp_set_params(DataParallel* dp, size_t num_params, int zero, size_t align) {
    dp->num_params = num_params;
    const size_t chunk = (num_params + (size_t)dp->world - 1) / (size_t)dp->world;
    dp->chunk = (chunk + align - 1) / align * align;
    dp->zero = zero && dp->world > 1;
    if (dp->zero) {
        dp_shard_range(num_params, dp->chunk, dp->rank, &dp->lo, &dp->hi);
    } else {
        dp->lo = 0;
        dp->hi = num_params;
    }
}

// whether this rank trains micro-batch (or validation batch) i
static inline int dp_owns_batch(const DataParallel* dp, long long i) { return i % dp->world == dp->rank; }

// FNV-1a over bytes, for the agreement check
static inline uint64_t dp_hash(uint64_t h, const void* p, size_t n) {
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; i++) { h = (h ^ b[i]) * 0x100000001b3ULL; }
    return h;
}
#define DP_HASH_SEED 0xcbf29ce484222325ULL

// Every rank must hold the same `value` (a hash of what must agree). Returns 1, or 0 after rank 0
// printed one line naming `what`.
static inline int dp_agree(DataParallel* dp, uint64_t value, const char* what) {
    if (dp->alone) { return 1; }
    uint64_t lo = value, hi = value;
    if (!dp->backend->allreduce(dp, &lo, 1, DP_U64, DP_MIN, what) || !dp->backend->allreduce(dp, &hi, 1, DP_U64, DP_MAX, what)) {
        return 0;
    }
    if (lo == hi) { return 1; }
    dp->agreed_exit = 1; // every rank saw the same two values
    if (dp->rank == 0) {
        fprintf(stderr, "error: the %d processes differ in %s (HINT: every process must run the same command on the same "
                "files)\n", dp->world, what);
    }
    return 0;
}

// Whether every rank is ok (each passes its own verdict): 1 when all are; 0 when any is not (or the
// collective failed), which every rank then knows, so they all stop together (dp->agreed_exit).
static inline int dp_all_ok(DataParallel* dp, int ok, const char* what) {
    if (dp->alone) { return ok; }
    int all = ok ? 1 : 0;
    if (!dp->backend->allreduce(dp, &all, 1, DP_I32, DP_MIN, what)) { return 0; }
    if (!all) { dp->agreed_exit = 1; }
    return all;
}

// sums host doubles over the ranks
static inline int dp_sum_doubles(DataParallel* dp, double* v, int n, const char* what) {
    return dp->alone || dp->backend->allreduce(dp, v, (size_t)n, DP_F64, DP_SUM, what);
}

// the largest of an int over the ranks (the stop signal: any rank's)
static inline int dp_max_int(DataParallel* dp, int* v, const char* what) {
    return dp->alone || dp->backend->allreduce(dp, v, 1, DP_I32, DP_MAX, what);
}

// the summed gradients: all of them (-z 0), or this rank's shard (-z 1)
static inline int dp_reduce_gradients(DataParallel* dp, void* grads, DPType t) {
    if (dp->alone) { return 1; }
    return dp->zero ? dp->backend->reduce_scatter(dp, grads, t, "the gradients' reduce-scatter")
                    : dp->backend->allreduce(dp, grads, dp->num_params, t, DP_SUM, "the gradients' all-reduce");
}

// after a ZeRO-1 update: every rank's shard of the parameters to every rank
static inline int dp_gather_parameters(DataParallel* dp, void* params, DPType t) {
    return !dp->zero || dp->backend->allgather(dp, params, t, "the parameters' all-gather");
}

static inline void dp_finish(DataParallel* dp) {
    if (dp->backend->finalize != NULL) { dp->backend->finalize(dp); }
}

// when a collective failed, for its message: "at step N" or "before the first step"
static inline void dp_when(const DataParallel* dp, char* buf, size_t size) {
    if (dp->step >= 0) { snprintf(buf, size, "at step %d", dp->step); }
    else { snprintf(buf, size, "before the first step"); }
}

// a steady clock, for the collectives' deadlines
static inline double dp_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ----------------------------------------------------------------------------
// the world of one: a process alone (no MPI, no NCCL, or one process)

static inline int dp_none_allreduce(DataParallel*, void*, size_t, DPType, DPOp, const char*) { return 1; }
static inline int dp_none_reduce_scatter(DataParallel*, void*, DPType, const char*) { return 1; }
static inline int dp_none_allgather(DataParallel*, void*, DPType, const char*) { return 1; }
static inline int dp_none_gather(DataParallel* dp, const void* shard, void* full, DPType t, const char*) {
    if (shard != full) { memcpy(full, shard, dp->num_params * dp_type_size(t)); } // host memory: the CPU trainer's
    return 1;
}
static inline int dp_none_barrier(DataParallel*, const char*) { return 1; }
static inline void dp_none_abort(DataParallel*) {}

static const DPBackend kDPNone = {"none", dp_none_allreduce, dp_none_reduce_scatter, dp_none_allgather, dp_none_gather,
                                  dp_none_barrier, dp_none_abort, NULL};

static inline void dp_init_single(DataParallel* dp) {
    memset(dp, 0, sizeof(*dp));
    dp->world = 1;
    dp->step = -1;
    dp->alone = 1;
    dp->backend = &kDPNone;
    dp->timeout_s = 600.0;
}

// ----------------------------------------------------------------------------
// MPI (the CPU trainer): non-blocking collectives, waited for with a deadline

#ifdef DP_MPI

// (no DP_BF16: the CPU trainer is fp32, and MPI has no bf16 sum)
static inline MPI_Datatype dp_mpi_type(DPType t) {
    return t == DP_F64 ? MPI_DOUBLE : t == DP_I32 ? MPI_INT : t == DP_U64 ? MPI_UINT64_T : MPI_FLOAT;
}
static inline MPI_Op dp_mpi_op(DPOp op) { return op == DP_MAX ? MPI_MAX : op == DP_MIN ? MPI_MIN : MPI_SUM; }

// MPI's counts are int: a tensor of more than 2^31 - 1 values goes in pieces
#define DP_MPI_PIECE ((size_t)1 << 30)

typedef struct {
    int* counts;   // (world) each rank's shard size, for the v-collectives
    int* displs;   // (world) where each shard starts
    float* shard;  // (chunk) the reduce-scatter's result before it moves to [lo, hi)
} DPMpi;

// waits for `req` at most timeout_s; on a timeout prints one line and ends the job
static inline int dp_mpi_wait(DataParallel* dp, MPI_Request* req, const char* what) {
    const double deadline = dp_now() + dp->timeout_s;
    int done = 0;
    struct timespec pause = {0, 20000}; // 20 us between polls: MPI progresses inside MPI_Test
    while (1) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done) { return 1; }
        if (dp_now() > deadline) { break; }
        nanosleep(&pause, NULL);
    }
    char when[48];
    dp_when(dp, when, sizeof(when));
    fprintf(stderr, "error: rank %d: %s %s waited %.0f s for the other %d process%s and gave up (HINT: one died "
            "or hangs: see its output above; --collective_timeout sets the wait)\n", dp->rank, what, when,
            dp->timeout_s, dp->world - 1, dp->world == 2 ? "" : "es");
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 0;
}

static inline int dp_mpi_allreduce(DataParallel* dp, void* buf, size_t n, DPType t, DPOp op, const char* what) {
    for (size_t off = 0; off < n; off += DP_MPI_PIECE) {
        const int count = (int)(n - off < DP_MPI_PIECE ? n - off : DP_MPI_PIECE);
        MPI_Request req;
        MPI_Iallreduce(MPI_IN_PLACE, (char*)buf + off * dp_type_size(t), count, dp_mpi_type(t), dp_mpi_op(op),
                       MPI_COMM_WORLD, &req);
        if (!dp_mpi_wait(dp, &req, what)) { return 0; }
    }
    return 1;
}

// The v-collectives take int counts: the shards of a model over 2^31 - 1 parameters per rank would
// need pieces, which the CPU trainer (small models, by design) never meets; dp_mpi_setup_shards refuses them.
static inline int dp_mpi_reduce_scatter(DataParallel* dp, void* buf, DPType t, const char* what) {
    DPMpi* m = (DPMpi*)dp->impl;
    MPI_Request req;
    MPI_Ireduce_scatter(buf, m->shard, m->counts, dp_mpi_type(t), MPI_SUM, MPI_COMM_WORLD, &req);
    if (!dp_mpi_wait(dp, &req, what)) { return 0; }
    memcpy((char*)buf + dp->lo * dp_type_size(t), m->shard, (dp->hi - dp->lo) * dp_type_size(t));
    return 1;
}

static inline int dp_mpi_allgather(DataParallel* dp, void* buf, DPType t, const char* what) {
    DPMpi* m = (DPMpi*)dp->impl;
    MPI_Request req;
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, m->counts, m->displs, dp_mpi_type(t), MPI_COMM_WORLD, &req);
    return dp_mpi_wait(dp, &req, what);
}

static inline int dp_mpi_gather(DataParallel* dp, const void* shard, void* full, DPType t, const char* what) {
    DPMpi* m = (DPMpi*)dp->impl;
    MPI_Request req;
    MPI_Igatherv(shard, (int)(dp->hi - dp->lo), dp_mpi_type(t), full, m->counts, m->displs, dp_mpi_type(t), 0,
                 MPI_COMM_WORLD, &req);
    return dp_mpi_wait(dp, &req, what);
}

static inline int dp_mpi_barrier(DataParallel* dp, const char* what) {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    return dp_mpi_wait(dp, &req, what);
}

static inline void dp_mpi_abort(DataParallel*) { MPI_Abort(MPI_COMM_WORLD, 1); }

static inline void dp_mpi_finalize(DataParallel* dp) {
    DPMpi* m = (DPMpi*)dp->impl;
    if (m != NULL) {
        free(m->counts);
        free(m->displs);
        free(m->shard);
        free(m);
        dp->impl = NULL;
    }
    MPI_Finalize();
}

static const DPBackend kDPMpi = {"MPI", dp_mpi_allreduce, dp_mpi_reduce_scatter, dp_mpi_allgather, dp_mpi_gather,
                                 dp_mpi_barrier, dp_mpi_abort, dp_mpi_finalize};

// MPI_Init and the world: before anything else in main (a process started without mpirun is a world of one)
static inline void dp_mpi_init(DataParallel* dp, int* argc, char*** argv) {
    dp_init_single(dp);
    MPI_Init(argc, argv);
    MPI_Comm_size(MPI_COMM_WORLD, &dp->world);
    MPI_Comm_rank(MPI_COMM_WORLD, &dp->rank);
    dp->backend = &kDPMpi;
    dp->alone = 0;
}

// the shards' counts, once the parameter count is known (dp_set_params). Returns 1, or 0 with a message.
static inline int dp_mpi_setup_shards(DataParallel* dp, char* msg, size_t msg_size) {
    if (dp->num_params > (size_t)2147483647) {
        snprintf(msg, msg_size, "%zu parameters: MPI's counts and offsets stop at 2^31 - 1, and the CPU trainer's models are "
                 "smaller (HINT: the CUDA trainer with NCCL)", dp->num_params);
        return 0;
    }
    DPMpi* m = (DPMpi*)calloc(1, sizeof(DPMpi));
    m->counts = (int*)malloc((size_t)dp->world * sizeof(int));
    m->displs = (int*)malloc((size_t)dp->world * sizeof(int));
    m->shard = (float*)malloc((dp->chunk > 0 ? dp->chunk : 1) * sizeof(float));
    for (int r = 0; r < dp->world; r++) {
        size_t lo, hi;
        dp_shard_range(dp->num_params, dp->chunk, r, &lo, &hi);
        m->counts[r] = (int)(hi - lo);
        m->displs[r] = (int)lo;
    }
    dp->impl = m;
    return 1;
}
#endif // DP_MPI

// ----------------------------------------------------------------------------
// NCCL (the CUDA trainer, built with -DDP_NCCL where the Makefile finds NCCL): one GPU per process.
// The tensors (DP_F32 gradients, DP_BF16 parameters) are device memory; host scalars go through a
// small device buffer. Every collective runs on the communicator's own stream after the trainer's
// work so far (an event on the default stream), and the host waits for it with a deadline: the
// communicator is non-blocking (ncclConfig_t.blocking = 0), so no NCCL call waits for a peer
// inside NCCL where the deadline could not see it. The shards are uneven (the last may be short or
// empty), so the reduce-scatter is one ncclReduce per shard to its owner and the all-gather one
// ncclBroadcast per shard from its owner, each group in place.
// In the CPU runtime's build (dev/cudacpu) nccl.h declares and dev/cudacpu/nccl_cpu.h defines these
// functions: processes on one machine exchanging buffers through files, so that make test runs this
// code over two processes.

#ifdef DP_NCCL
#include <errno.h>
#include <unistd.h>

typedef struct {
    ncclComm_t comm;
    cudaStream_t stream;   // the collectives' own stream
    cudaEvent_t ready;     // the trainer's work before a collective, on the default stream
    void* scalars;         // (DP_NCCL_SCALARS x 8 bytes) device buffer for host scalars
} DPNccl;
#define DP_NCCL_SCALARS 8

// The communicator of this process while it stands: an exit() of this process alone (a CUDA error,
// a file it cannot write) aborts it on the way out, so that NCCL tells the other processes at once
// instead of leaving them to their deadlines.
static ncclComm_t g_dp_nccl_comm = NULL;
static void dp_nccl_abort_at_exit(void) {
    if (g_dp_nccl_comm != NULL) { ncclCommAbort(g_dp_nccl_comm); }
    g_dp_nccl_comm = NULL;
}

static inline ncclDataType_t dp_nccl_type(DPType t) {
    return t == DP_BF16 ? ncclBfloat16 : t == DP_F64 ? ncclFloat64 : t == DP_I32 ? ncclInt32 : t == DP_U64 ? ncclUint64
                                                                                                        : ncclFloat32;
}
static inline ncclRedOp_t dp_nccl_op(DPOp op) { return op == DP_MAX ? ncclMax : op == DP_MIN ? ncclMin : ncclSum; }

// a failed or timed-out collective: one line, then the communicator is aborted (which also frees a
// kernel of NCCL's waiting for a dead peer) and this process ends; the other processes' own
// deadlines, or NCCL's error on the lost connection, end them
static inline int dp_nccl_fail(DataParallel* dp, const char* what, const char* why) {
    char when[48];
    dp_when(dp, when, sizeof(when));
    fprintf(stderr, "error: rank %d: %s %s %s\n", dp->rank, what, when, why);
    fflush(stdout);
    fflush(stderr);
    dp->backend->abort_job(dp);
    return 0;
}

static inline int dp_nccl_timeout(DataParallel* dp, const char* what) {
    char why[256];
    snprintf(why, sizeof(why), "waited %.0f s for the other %d process%s and gave up (HINT: one died or hangs: see its "
             "output; --collective_timeout sets the wait)", dp->timeout_s, dp->world - 1, dp->world == 2 ? "" : "es");
    return dp_nccl_fail(dp, what, why);
}

// waits, at most timeout_s from now, for the call that returned r (ncclInProgress: still being
// issued, by a non-blocking communicator), then for its work on the stream
static inline int dp_nccl_wait(DataParallel* dp, ncclResult_t r, const char* what) {
    DPNccl* n = (DPNccl*)dp->impl;
    const double deadline = dp_now() + dp->timeout_s;
    struct timespec pause = {0, 20000};
    while (r == ncclInProgress) {
        if (dp_now() > deadline) { return dp_nccl_timeout(dp, what); }
        nanosleep(&pause, NULL);
        if (ncclCommGetAsyncError(n->comm, &r) != ncclSuccess) { break; }
    }
    char why[512];
    if (r != ncclSuccess) {
        snprintf(why, sizeof(why), "failed in NCCL: %s (HINT: NCCL_DEBUG=WARN says more)", ncclGetErrorString(r));
        return dp_nccl_fail(dp, what, why);
    }
    while (1) {
        const cudaError_t e = cudaStreamQuery(n->stream);
        if (e == cudaSuccess) { return 1; }
        if (e != cudaErrorNotReady) {
            snprintf(why, sizeof(why), "failed on the GPU: %s", cudaGetErrorString(e));
            return dp_nccl_fail(dp, what, why);
        }
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(n->comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
            snprintf(why, sizeof(why), "failed in NCCL: %s (HINT: another process died: see its output)",
                     ncclGetErrorString(async));
            return dp_nccl_fail(dp, what, why);
        }
        if (dp_now() > deadline) { return dp_nccl_timeout(dp, what); }
        nanosleep(&pause, NULL);
    }
}

// the collectives' stream waits for what the trainer has issued so far (on the same GPU: main sets it
// before anything is made)
static inline int dp_nccl_after_trainer(DataParallel* dp, const char* what) {
    DPNccl* n = (DPNccl*)dp->impl;
    const cudaError_t e = cudaEventRecord(n->ready, 0);
    const cudaError_t w = e == cudaSuccess ? cudaStreamWaitEvent(n->stream, n->ready, 0) : e;
    if (w != cudaSuccess) {
        char why[256];
        snprintf(why, sizeof(why), "could not be ordered after the trainer's work: %s", cudaGetErrorString(w));
        return dp_nccl_fail(dp, what, why);
    }
    return 1;
}

static inline int dp_nccl_allreduce(DataParallel* dp, void* buf, size_t count, DPType t, DPOp op, const char* what) {
    DPNccl* n = (DPNccl*)dp->impl;
    const int host = t == DP_F64 || t == DP_I32 || t == DP_U64;
    const size_t bytes = count * dp_type_size(t);
    if (host && count > DP_NCCL_SCALARS) { return dp_nccl_fail(dp, what, "has too many host values (internal)"); }
    void* dev = host ? n->scalars : buf;
    if (!dp_nccl_after_trainer(dp, what)) { return 0; }
    if (host && cudaMemcpyAsync(dev, buf, bytes, cudaMemcpyHostToDevice, n->stream) != cudaSuccess) {
        return dp_nccl_fail(dp, what, "could not copy its values to the GPU");
    }
    if (!dp_nccl_wait(dp, ncclAllReduce(dev, dev, count, dp_nccl_type(t), dp_nccl_op(op), n->comm, n->stream), what)) {
        return 0;
    }
    if (host && cudaMemcpy(buf, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        return dp_nccl_fail(dp, what, "could not copy its result to the host");
    }
    return 1;
}

// one in-place call per non-empty shard, rooted at the shard's owner: ncclReduce (reduce 1: the
// reduce-scatter) or ncclBroadcast (reduce 0: the all-gather)
static inline int dp_nccl_per_shard(DataParallel* dp, void* buf, DPType t, int reduce, const char* what) {
    DPNccl* n = (DPNccl*)dp->impl;
    if (!dp_nccl_after_trainer(dp, what)) { return 0; }
    ncclGroupStart();
    for (int r = 0; r < dp->world; r++) {
        size_t lo, hi;
        dp_shard_range(dp->num_params, dp->chunk, r, &lo, &hi);
        if (hi == lo) { continue; }
        char* p = (char*)buf + lo * dp_type_size(t);
        if (reduce) { ncclReduce(p, p, hi - lo, dp_nccl_type(t), ncclSum, r, n->comm, n->stream); }
        else { ncclBroadcast(p, p, hi - lo, dp_nccl_type(t), r, n->comm, n->stream); }
    }
    return dp_nccl_wait(dp, ncclGroupEnd(), what);
}
static inline int dp_nccl_reduce_scatter(DataParallel* dp, void* buf, DPType t, const char* what) {
    return dp_nccl_per_shard(dp, buf, t, 1, what);
}
static inline int dp_nccl_allgather(DataParallel* dp, void* buf, DPType t, const char* what) {
    return dp_nccl_per_shard(dp, buf, t, 0, what);
}

// shard: (hi - lo) values on this process's GPU; full: num_params values in rank 0's host memory.
// One shard at a time through a buffer of one shard on rank 0's GPU, so that a checkpoint of a
// ZeRO-1 run needs no more GPU memory than the shards it saved.
static inline int dp_nccl_gather(DataParallel* dp, const void* shard, void* full, DPType t, const char* what) {
    DPNccl* n = (DPNccl*)dp->impl;
    const size_t size = dp_type_size(t);
    void* stage = NULL;
    if (dp->rank == 0 && cudaMalloc(&stage, (dp->chunk > 0 ? dp->chunk : 1) * size) != cudaSuccess) {
        return dp_nccl_fail(dp, what, "could not get a shard's buffer on the GPU");
    }
    int ok = 1;
    for (int r = 0; r < dp->world && ok; r++) {
        size_t lo, hi;
        dp_shard_range(dp->num_params, dp->chunk, r, &lo, &hi);
        if (hi == lo || (dp->rank != 0 && dp->rank != r)) { continue; }
        if (dp->rank == 0 && r == 0) { // rank 0's own shard
            ok = cudaMemcpy((char*)full + lo * size, shard, (hi - lo) * size, cudaMemcpyDeviceToHost) == cudaSuccess ||
                 dp_nccl_fail(dp, what, "could not copy rank 0's shard to the host");
            continue;
        }
        ok = dp_nccl_after_trainer(dp, what);
        if (!ok) { break; }
        const ncclResult_t res = dp->rank == 0 ? ncclRecv(stage, hi - lo, dp_nccl_type(t), r, n->comm, n->stream)
                                               : ncclSend(shard, hi - lo, dp_nccl_type(t), 0, n->comm, n->stream);
        ok = dp_nccl_wait(dp, res, what);
        if (ok && dp->rank == 0) {
            ok = cudaMemcpy((char*)full + lo * size, stage, (hi - lo) * size, cudaMemcpyDeviceToHost) == cudaSuccess ||
                 dp_nccl_fail(dp, what, "could not copy a shard to the host");
        }
    }
    if (stage != NULL) { cudaFree(stage); }
    return ok;
}

static inline int dp_nccl_barrier(DataParallel* dp, const char* what) {
    int one = 1;
    return dp_nccl_allreduce(dp, &one, 1, DP_I32, DP_SUM, what);
}

static inline void dp_nccl_abort(DataParallel* dp) {
    (void)dp;
    dp_nccl_abort_at_exit();
    exit(EXIT_FAILURE); // as MPI_Abort: this process ends here
}

// an end every rank reached together: the communicator is finalized (flushing what is in flight)
// and freed; any other end aborts it
static inline void dp_nccl_finalize(DataParallel* dp) {
    DPNccl* n = (DPNccl*)dp->impl;
    if (n == NULL) { return; }
    ncclResult_t r = ncclInternalError;
    if (dp->agreed_exit || dp->world == 1) {
        r = ncclCommFinalize(n->comm);
        const double deadline = dp_now() + dp->timeout_s;
        struct timespec pause = {0, 20000};
        while (r == ncclInProgress && dp_now() < deadline) {
            nanosleep(&pause, NULL);
            ncclCommGetAsyncError(n->comm, &r);
        }
    }
    if (r == ncclSuccess) { ncclCommDestroy(n->comm); }
    else { ncclCommAbort(n->comm); } // not agreed, or the finalize failed or timed out
    g_dp_nccl_comm = NULL;
    cudaFree(n->scalars);
    cudaEventDestroy(n->ready);
    cudaStreamDestroy(n->stream);
    free(n);
    dp->impl = NULL;
}

static const DPBackend kDPNccl = {"NCCL", dp_nccl_allreduce, dp_nccl_reduce_scatter, dp_nccl_allgather, dp_nccl_gather,
                                  dp_nccl_barrier, dp_nccl_abort, dp_nccl_finalize};

// The shared-folder rendezvous (-pi fs -pf DIR): rank 0 writes NCCL's unique id into DIR/ncclUniqueId
// (a temporary name, then a rename: a reader never sees half of it), the others wait for the file
// and read it; once the communicator stands, every process has read it and rank 0 deletes it. A file
// left by a run that died before that is overwritten by rank 0, but a process of a new run that
// starts before its rank 0 may read it: its communicator then never forms and the timeout names
// the file.
typedef struct {
    char magic[8];     // "LLMCQKV1"
    int world;         // -pn of the rank 0 that wrote it
    int pad;
    ncclUniqueId id;
} DPNcclIdFile;

static inline int dp_nccl_id_exchange(int world, int rank, const char* dir, double timeout_s, ncclUniqueId* id,
                                      char* path, size_t path_size, char* msg, size_t msg_size) {
    snprintf(path, path_size, "%s/ncclUniqueId", dir);
    DPNcclIdFile rec;
    memset(&rec, 0, sizeof(rec));
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(id);
        if (r != ncclSuccess) {
            snprintf(msg, msg_size, "NCCL could not make its unique id: %s", ncclGetErrorString(r));
            return 0;
        }
        memcpy(rec.magic, "LLMCQKV1", 8);
        rec.world = world;
        rec.id = *id;
        char tmp[4300]; // path and the suffix
        snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
        FILE* f = fopen(tmp, "wb");
        const int ok = f != NULL && fwrite(&rec, sizeof(rec), 1, f) == 1;
        if (f != NULL && fclose(f) != 0) { remove(tmp); f = NULL; }
        if (!ok || f == NULL || rename(tmp, path) != 0) {
            remove(tmp);
            snprintf(msg, msg_size, "-pf %s: cannot write %s: %s (HINT: -pf names a folder every process can write and read)",
                     dir, path, strerror(errno));
            return 0;
        }
        return 1;
    }
    const double deadline = dp_now() + timeout_s;
    struct timespec pause = {0, 10000000}; // 10 ms
    while (1) {
        FILE* f = fopen(path, "rb");
        if (f != NULL) {
            const int got = fread(&rec, sizeof(rec), 1, f) == 1;
            fclose(f);
            if (got && memcmp(rec.magic, "LLMCQKV1", 8) == 0) { break; }
        }
        if (dp_now() > deadline) {
            snprintf(msg, msg_size, "-pf %s: rank 0 wrote no %s within %.0f s (HINT: start rank 0 with the same -pf; "
                     "--collective_timeout sets the wait)", dir, path, timeout_s);
            return 0;
        }
        nanosleep(&pause, NULL);
    }
    if (rec.world != world) {
        snprintf(msg, msg_size, "-pn %d: rank 0 runs with -pn %d (%s; HINT: every process gets the same -pn, or a stale %s "
                 "of another run is in -pf: delete it)", world, rec.world, path, path);
        return 0;
    }
    *id = rec.id;
    return 1;
}

// The communicator of `world` processes, this one `rank`, on the current CUDA device, met through
// the folder `dir`. Every process waits at most timeout_s. Returns 1, or 0 with a one-line message.
static inline int dp_nccl_init(DataParallel* dp, int world, int rank, const char* dir, double timeout_s, char* msg,
                               size_t msg_size) {
    dp_init_single(dp);
    dp->world = world;
    dp->rank = rank;
    dp->timeout_s = timeout_s;
    ncclUniqueId id;
    char path[4200];
    if (!dp_nccl_id_exchange(world, rank, dir, timeout_s, &id, path, sizeof(path), msg, msg_size)) { return 0; }
    DPNccl* n = (DPNccl*)calloc(1, sizeof(DPNccl));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&n->comm, world, id, rank, &config);
    const double deadline = dp_now() + timeout_s;
    struct timespec pause = {0, 1000000};
    while (r == ncclInProgress && dp_now() < deadline) {
        nanosleep(&pause, NULL);
        ncclCommGetAsyncError(n->comm, &r);
    }
    if (r != ncclSuccess) {
        if (r == ncclInProgress) {
            snprintf(msg, msg_size, "NCCL's communicator of %d processes did not form within %.0f s (HINT: start all %d "
                     "with the same -pn and -pf; a stale %s of a run that died can hold a dead id: delete it)", world,
                     timeout_s, world, path);
        } else {
            snprintf(msg, msg_size, "NCCL's communicator of %d processes failed: %s (HINT: NCCL_DEBUG=WARN says more)", world,
                     ncclGetErrorString(r));
        }
        if (n->comm != NULL) { ncclCommAbort(n->comm); }
        free(n);
        if (rank == 0) { remove(path); } // no stale id for the next launch
        return 0;
    }
    if (cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming) != cudaSuccess ||
        cudaMalloc(&n->scalars, DP_NCCL_SCALARS * 8) != cudaSuccess) {
        snprintf(msg, msg_size, "the NCCL collectives' stream, event or scalar buffer could not be made");
        ncclCommAbort(n->comm);
        free(n);
        if (rank == 0) { remove(path); }
        return 0;
    }
    dp->backend = &kDPNccl;
    dp->alone = 0;
    dp->impl = n;
    g_dp_nccl_comm = n->comm;
    atexit(dp_nccl_abort_at_exit);
    // rank 0's communicator stands only once every process has joined, each having read the id: the
    // file is done with
    if (rank == 0) { remove(path); }
    return dp_nccl_barrier(dp, "the barrier after NCCL's rendezvous");
}
#endif // DP_NCCL

// The CPU trainer's processes: MPI's world where the binary has MPI (DP_MPI), else a world of one
static inline void dp_init_host_process(DataParallel* dp, int* argc, char*** argv) {
#ifdef DP_MPI
    dp_mpi_init(dp, argc, argv);
#else
    (void)argc;
    (void)argv;
    dp_init_single(dp);
#endif
}

// once the parameter count is known: the shards, and what the backend needs of them
static inline int dp_setup_params(DataParallel* dp, size_t num_params, int zero, size_t align, char* msg, size_t msg_size) {
    dp_set_params(dp, num_params, zero, align);
#ifdef DP_MPI
    if (dp->backend == &kDPMpi) { return dp_mpi_setup_shards(dp, msg, msg_size); }
#endif
    (void)msg;
    (void)msg_size;
    return 1;
}

#endif // DATA_PARALLEL_H
