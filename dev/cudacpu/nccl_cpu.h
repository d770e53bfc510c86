/*
nccl_cpu.h: NCCL for the CPU runtime, so that the CUDA trainer's data parallelism (dev/trainer/data_parallel.h,
-pi fs) runs in make test as two or three processes of build/cudacpu/train_gpt2cu_<scheme> on one
machine. As with the rest of dev/cudacpu, NCCL's own header (nccl.h) gives the types and
declarations and this file defines the functions the trainer calls; cuda_cpu.h includes it in the
builds with -DDP_NCCL.

The processes exchange buffers through files in one folder, the unique id (ncclGetUniqueId makes
it with mkdtemp under $TMPDIR, else /tmp):
  - every collective gets the next number of its communicator, so each process's k-th collective
    is the same call; at issue a process writes its send buffer to c<k>_r<rank> (a temporary name,
    then a rename) from work queued on the call's stream, run at once after only what that stream
    orders before it (cuda_cpu.h's queues: the trainer's event wait, or nothing, so a missing wait
    sends what is not computed yet), and the collective completes once every rank's file of k is
    there. Its result then lands in the receive buffer from work queued on the call's stream (land),
    so a trainer that reads it without waiting for that stream reads what was there before. Sums go
    in rank order, so every rank gets the same bits.
  - ncclSend writes p<src>_<dst>_<n>, the n-th message from src to dst; ncclRecv waits for it, reads
    it and deletes it.
  - the communicator is non-blocking, as the trainer configures the real one: a call whose peers
    have not arrived returns ncclInProgress, and ncclCommGetAsyncError makes progress (reads the files
    that have come) until it returns ncclSuccess. So the trainer's deadline is what ends a wait for a
    process that died, as with NCCL on GPUs.
  - ncclGroupStart/ncclGroupEnd: the calls between them are posted together at ncclGroupEnd and
    complete in order.
  - a process deletes its own collective files once every process is past them: the trainer waits
    for each call (or group) before the next, and a group of collectives completes only when every
    process has posted it, so when a process issues one, every process has finished the group of
    collectives before its previous one (sends, which complete at once, do not count). The join and
    final marker files stay, with the folder.
What it does not model: NCCL's algorithms and their float order (a ring's sum is not rank order), its
timing, and communicators over several devices of one process.
*/
#ifndef CUDACPU_NCCL_CPU_H
#define CUDACPU_NCCL_CPU_H

#include <nccl.h>
#include <unistd.h>

namespace nccl_cpu {

struct Op {
    enum Kind { ALLREDUCE, REDUCE, BROADCAST, SEND, RECV } kind;
    const void* send;
    void* recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;             // REDUCE, BROADCAST: the root; SEND, RECV: the peer
    long long number;     // the collective's number, or the message's
    cudaStream_t stream;  // its posting runs there, in order (cuda_cpu.h's queues)
};

struct Comm {
    std::string dir;
    int world = 0, rank = 0;
    long long next_collective = 0;
    long long group_start = 0, prev_group_start = 0, deleted_below = 0;
    std::vector<long long> sent, received; // messages per peer
    std::vector<Op> pending;               // posted, not yet complete, in order
    ncclResult_t state = ncclInProgress;   // ncclInProgress while joining, finalizing or waiting
    bool joining = true, finalizing = false;
};

inline int group_depth = 0;
inline std::vector<std::pair<Comm*, Op>> grouped;

static size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static std::string path_of(const Comm* c, const char* fmt, long long a, long long b, long long d = -1) {
    char name[128];
    snprintf(name, sizeof(name), fmt, a, b, d);
    return c->dir + "/" + name;
}

// what a collective's file says of its call, ahead of the data: every rank's must be the same call
struct Header {
    int kind, type, root, op;
    unsigned long long count;
};

static bool write_file(const std::string& path, const void* data, size_t bytes, const Header* header = nullptr) {
    const std::string tmp = path + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (f == nullptr) { return false; }
    bool ok = header == nullptr || fwrite(header, sizeof(*header), 1, f) == 1;
    ok = ok && (bytes == 0 || fwrite(data, 1, bytes, f) == bytes);
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp.c_str(), path.c_str()) == 0;
}

// the whole file, when it is there
static bool read_file(const std::string& path, std::vector<unsigned char>* out) {
    FILE* f = fopen(path.c_str(), "rb");
    if (f == nullptr) { return false; }
    out->clear();
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) { out->insert(out->end(), buf, buf + n); }
    fclose(f);
    return true;
}

static bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

template <class T> static void reduce_into(T* acc, const T* x, size_t n, ncclRedOp_t op) {
    for (size_t i = 0; i < n; i++) {
        acc[i] = op == ncclSum ? (T)(acc[i] + x[i]) : op == ncclMax ? (x[i] > acc[i] ? x[i] : acc[i])
                                                                    : (x[i] < acc[i] ? x[i] : acc[i]);
    }
}
static void reduce_bf16(__nv_bfloat16* acc, const __nv_bfloat16* x, size_t n, ncclRedOp_t op) {
    for (size_t i = 0; i < n; i++) {
        const float a = __bfloat162float(acc[i]), b = __bfloat162float(x[i]);
        acc[i] = __float2bfloat16(op == ncclSum ? a + b : op == ncclMax ? (b > a ? b : a) : (b < a ? b : a));
    }
}
static void reduce(void* acc, const void* x, size_t n, ncclDataType_t t, ncclRedOp_t op) {
    switch (t) {
    case ncclFloat32: reduce_into((float*)acc, (const float*)x, n, op); break;
    case ncclFloat64: reduce_into((double*)acc, (const double*)x, n, op); break;
    case ncclInt32: reduce_into((int32_t*)acc, (const int32_t*)x, n, op); break;
    case ncclUint64: reduce_into((uint64_t*)acc, (const uint64_t*)x, n, op); break;
    case ncclBfloat16: reduce_bf16((__nv_bfloat16*)acc, (const __nv_bfloat16*)x, n, op); break;
    default: fprintf(stderr, "nccl_cpu: reduction of data type %d not modelled\n", (int)t); abort();
    }
}

// op's number: the communicator's next collective, or the next message to or from its peer
static void number(Comm* c, Op* op) {
    op->number = op->kind == Op::SEND ? c->sent[op->root]++ : op->kind == Op::RECV ? c->received[op->root]++
                                                                                 : c->next_collective++;
}

// writes what this rank sends for op (numbered); false if the file cannot be written. It runs on the
// op's stream: the send buffer is read when the stream gets there, as a GPU's NCCL kernel reads it
static bool post(Comm* c, const Op* op) {
    const size_t bytes = op->count * type_size(op->type);
    if (op->kind == Op::SEND) {
        return write_file(path_of(c, "p%lld_%lld_%lld", c->rank, op->root, op->number), op->send, bytes);
    }
    if (op->kind == Op::RECV) { return true; }
    const bool sends = op->kind != Op::BROADCAST || op->root == c->rank; // a broadcast's others post no data
    const Header h = {(int)op->kind, (int)op->type, op->root, (int)op->op, (unsigned long long)op->count};
    return write_file(path_of(c, "c%lld_r%lld", op->number, c->rank), op->send, sends ? bytes : 0, &h);
}

// the op's result into its receive buffer from work queued on its stream: it lands when the stream
// gets there, as a GPU's NCCL kernel writes it, so a trainer that reads the buffer without waiting for
// that stream (dp_nccl_wait's cudaStreamQuery) reads what was there before
static void land(const Op* op, const unsigned char* data, size_t bytes) {
    void* recv = op->recv;
    std::vector<unsigned char> copy(data, data + bytes);
    cudacpu::enqueue_on(cudacpu::stream_of(op->stream), [recv, copy]() { memcpy(recv, copy.data(), copy.size()); });
}

// completes op if its files have come; false while they have not
static bool complete(Comm* c, Op* op) {
    const size_t bytes = op->count * type_size(op->type);
    std::vector<unsigned char> data;
    if (op->kind == Op::SEND) { return true; }
    if (op->kind == Op::RECV) {
        const std::string p = path_of(c, "p%lld_%lld_%lld", op->root, c->rank, op->number);
        if (!exists(p) || !read_file(p, &data) || data.size() != bytes) { return false; }
        land(op, data.data(), bytes);
        remove(p.c_str());
        return true;
    }
    std::vector<std::vector<unsigned char>> files(c->world);
    const Header mine = {(int)op->kind, (int)op->type, op->root, (int)op->op, (unsigned long long)op->count};
    for (int r = 0; r < c->world; r++) {
        const std::string p = path_of(c, "c%lld_r%lld", op->number, r);
        if (!exists(p)) { return false; }
        const bool sends = op->kind != Op::BROADCAST || op->root == r;
        if (!read_file(p, &files[r]) || files[r].size() != sizeof(Header) + (sends ? bytes : 0) ||
            memcmp(files[r].data(), &mine, sizeof(Header)) != 0) {
            // a process's k-th collective is not this one's: on a GPU, a hang or garbage
            fprintf(stderr, "nccl_cpu: rank %d: collective %lld differs between rank %d and this rank (another call, "
                    "count, type or root)\n", c->rank, op->number, r);
            c->state = ncclInvalidUsage;
            return false;
        }
    }
    const unsigned char* payload_root = files[op->root].data() + sizeof(Header);
    if (op->kind == Op::BROADCAST) {
        land(op, payload_root, bytes);
        return true;
    }
    if (op->kind == Op::REDUCE && op->root != c->rank) { return true; }
    std::vector<unsigned char> acc(files[0].begin() + sizeof(Header), files[0].end());
    for (int r = 1; r < c->world; r++) { reduce(acc.data(), files[r].data() + sizeof(Header), op->count, op->type, op->op); }
    land(op, acc.data(), bytes);
    return true;
}

static bool all_marked(const Comm* c, const char* fmt) {
    for (int r = 0; r < c->world; r++) {
        if (!exists(path_of(c, fmt, r, 0))) { return false; }
    }
    return true;
}

// makes what progress the files allow; the communicator's state
static ncclResult_t progress(Comm* c) {
    if (c->state != ncclInProgress) { return c->state; }
    if (c->joining) {
        if (!all_marked(c, "join_%lld")) { return ncclInProgress; }
        c->joining = false;
    }
    while (!c->pending.empty()) {
        if (!complete(c, &c->pending.front())) { return c->state; } // in progress, or a mismatch found
        c->pending.erase(c->pending.begin());
    }
    if (c->finalizing && !all_marked(c, "final_%lld")) { return ncclInProgress; }
    c->state = ncclSuccess;
    return ncclSuccess;
}

// posts the ops of one call or group: numbered now, their files written by work on their stream, which
// runs at once, after only what that stream orders before it (cuda_cpu.h: a stream wait on the trainer's
// event, or nothing), so a missing wait posts what the trainer has not computed yet
static ncclResult_t issue(Comm* c, std::vector<Op> ops) {
    if (c->state != ncclSuccess && c->state != ncclInProgress) { return c->state; }
    bool collective = false; // sends complete at once: only a collective waits for every process
    for (const Op& op : ops) { collective = collective || (op.kind != Op::SEND && op.kind != Op::RECV); }
    if (collective) {
        c->prev_group_start = c->group_start;
        c->group_start = c->next_collective;
        for (long long k = c->deleted_below; k < c->prev_group_start; k++) { // every process is past these
            remove(path_of(c, "c%lld_r%lld", k, c->rank).c_str());
        }
        c->deleted_below = c->prev_group_start;
    }
    for (Op& op : ops) {
        number(c, &op);
        c->pending.push_back(op);
    }
    cudacpu::Stream* s = cudacpu::stream_of(ops[0].stream);
    bool* failed = new bool(false);
    cudacpu::enqueue_on(s, [c, ops, failed]() {
        for (const Op& op : ops) { *failed = *failed || !post(c, &op); }
    });
    cudacpu::run_stream(s);
    const bool write_failed = *failed;
    delete failed;
    if (write_failed) {
        fprintf(stderr, "nccl_cpu: cannot write into %s\n", c->dir.c_str());
        c->state = ncclSystemError;
        return c->state;
    }
    c->state = ncclInProgress;
    return progress(c);
}

static ncclResult_t call(Comm* c, const Op& op) {
    if (c == nullptr) { return ncclInvalidArgument; }
    if (group_depth > 0) {
        grouped.push_back({c, op});
        return ncclSuccess;
    }
    return issue(c, {op});
}

} // namespace nccl_cpu

const char* ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error (nccl_cpu: a file in the exchange folder)";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    memset(id, 0, sizeof(*id));
    const char* tmp = getenv("TMPDIR");
    std::string templ = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/nccl_cpu_XXXXXX";
    if (templ.size() >= sizeof(id->internal)) { return ncclInvalidUsage; }
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) { return ncclSystemError; }
    memcpy(id->internal, buf.data(), buf.size());
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
    (void)config; // non-blocking, as the trainer asks
    if (nranks < 1 || rank < 0 || rank >= nranks || id.internal[0] == '\0') { return ncclInvalidArgument; }
    nccl_cpu::Comm* c = new nccl_cpu::Comm();
    c->dir = std::string(id.internal, strnlen(id.internal, sizeof(id.internal)));
    c->world = nranks;
    c->rank = rank;
    c->sent.assign(nranks, 0);
    c->received.assign(nranks, 0);
    *comm = (ncclComm_t)c;
    if (!nccl_cpu::write_file(nccl_cpu::path_of(c, "join_%lld", rank, 0), "", 0)) { return ncclSystemError; }
    return nccl_cpu::progress(c);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
    *asyncError = nccl_cpu::progress((nccl_cpu::Comm*)comm);
    return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
    nccl_cpu::group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    if (nccl_cpu::group_depth == 0) { return ncclInvalidUsage; }
    if (--nccl_cpu::group_depth > 0) { return ncclSuccess; }
    std::vector<std::pair<nccl_cpu::Comm*, nccl_cpu::Op>> ops;
    ops.swap(nccl_cpu::grouped);
    if (ops.empty()) { return ncclSuccess; }
    std::vector<nccl_cpu::Op> list;
    for (auto& p : ops) {
        if (p.first != ops[0].first) { return ncclInvalidUsage; } // one communicator per process here
        list.push_back(p.second);
    }
    return nccl_cpu::issue(ops[0].first, list);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    return nccl_cpu::call((nccl_cpu::Comm*)comm, {nccl_cpu::Op::ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, 0, stream});
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
    return nccl_cpu::call((nccl_cpu::Comm*)comm, {nccl_cpu::Op::REDUCE, sendbuff, recvbuff, count, datatype, op, root, 0, stream});
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    return nccl_cpu::call((nccl_cpu::Comm*)comm, {nccl_cpu::Op::BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, 0, stream});
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return nccl_cpu::call((nccl_cpu::Comm*)comm, {nccl_cpu::Op::SEND, sendbuff, nullptr, count, datatype, ncclSum, peer, 0, stream});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
    return nccl_cpu::call((nccl_cpu::Comm*)comm, {nccl_cpu::Op::RECV, nullptr, recvbuff, count, datatype, ncclSum, peer, 0, stream});
}

// every process marks its end; complete (through ncclCommGetAsyncError) once all have
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    nccl_cpu::Comm* c = (nccl_cpu::Comm*)comm;
    c->finalizing = true;
    if (!nccl_cpu::write_file(nccl_cpu::path_of(c, "final_%lld", c->rank, 0), "", 0)) { return ncclSystemError; }
    if (c->state == ncclSuccess) { c->state = ncclInProgress; }
    return nccl_cpu::progress(c);
}

// this process's collective files go (every process is past them once all have finalized)
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    nccl_cpu::Comm* c = (nccl_cpu::Comm*)comm;
    if (c->finalizing && c->state == ncclSuccess) {
        for (long long k = c->deleted_below; k < c->next_collective; k++) {
            remove(nccl_cpu::path_of(c, "c%lld_r%lld", k, c->rank).c_str());
        }
    }
    delete c;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    delete (nccl_cpu::Comm*)comm;
    return ncclSuccess;
}

#endif // CUDACPU_NCCL_CPU_H
