/*
test_streams.cu: the runtime's model of streams and events (cuda_cpu.h's queues), on the CPU runtime
(make build/cudacpu/test_streams) and on a GPU (make build/test_streams): what CUDA orders must hold
on both; what it leaves unordered, the CPU runtime must run in the order that breaks a program
relying on it (on a GPU such a program is a race, with no result to check: those checks say SKIP).

  ordered     a kernel on stream A writes a buffer, an event recorded after it, stream B waits for
              the event, then a kernel on B copies the buffer: B's copy holds A's values
  no_wait     the same without the wait: with CUDA_CPU_STREAMS=later (the default) B's copy runs first
              and holds what the buffer held before A ran
  legacy      a blocking stream's kernel, then a kernel on the legacy stream (0) reading its output:
              ordered by CUDA's legacy-stream rule; from a non-blocking stream without a wait: with
              CUDA_CPU_STREAMS=earlier the legacy stream's kernel runs first and reads the old values
              (each policy exposes one of the two; the other order is a SKIP line)
  event_sync  cudaEventSynchronize of an event between two kernels on one (non-blocking) stream
              runs the first and (CPU runtime) not the second; cudaStreamSynchronize of a stream that waits for
              another's event runs that other stream's work up to the event
  query       cudaStreamQuery and cudaEventQuery end (a host loop polling either finishes)
and two of the runtime's tools for the attention labs' --large (CPU runtime only; a GPU says SKIP):
  lazy_poison a 16 GiB cudaMalloc reads 0xFF at both ends and keeps a value copied to its last bytes,
              without taking 16 GiB of memory (its pages map a shared poison file)
  run_only    with one block of fill_kernel named, only that block's elements are written; then a
              launch of a kernel that is not named fails the next sync (the last check: the error is sticky)

./test_streams prints one PASS/FAIL/SKIP line per check and exits 1 on any FAIL; without a GPU, SKIP.
*/
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "test_streams: %s failed: %s\n", #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#ifdef CUDACPU_CUDA_CPU_H
static const int kOnRuntime = 1; // the CPU runtime: the unordered checks are deterministic here
static int runtime_order() { return cudacpu::stream_order(); } // 0 later, 1 earlier, 2 alternate
#else
static const int kOnRuntime = 0;
static int runtime_order() { return -1; }
#endif

#define N 1024
__global__ void fill_kernel(float* out, float value) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) { out[i] = value + (float)i; }
}
__global__ void copy_kernel(float* out, const float* in) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) { out[i] = in[i]; }
}

static int failures = 0;
static void verdict(const char* name, int ok, const char* what) {
    printf("%s streams %s: %s\n", ok ? "PASS" : "FAIL", name, what);
    failures += !ok;
}
// whether every element of the device buffer is value + i
static int holds(const float* d, float value) {
    static float h[N];
    CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) {
        if (h[i] != value + (float)i) { return 0; }
    }
    return 1;
}

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("SKIP streams: no CUDA device\n");
        return 0;
    }
    float *x, *y;
    CHECK(cudaMalloc(&x, N * sizeof(float)));
    CHECK(cudaMalloc(&y, N * sizeof(float)));
    cudaStream_t a, b, nb;
    CHECK(cudaStreamCreate(&a));
    CHECK(cudaStreamCreate(&b));
    CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    cudaEvent_t e, f;
    CHECK(cudaEventCreate(&e));
    CHECK(cudaEventCreate(&f));

    // ordered: A writes 1 + i, B waits for the event, then copies
    fill_kernel<<<4, 256>>>(x, 0.0f);
    CHECK(cudaDeviceSynchronize());
    fill_kernel<<<4, 256, 0, a>>>(x, 1.0f);
    CHECK(cudaEventRecord(e, a));
    CHECK(cudaStreamWaitEvent(b, e, 0));
    copy_kernel<<<4, 256, 0, b>>>(y, x);
    CHECK(cudaStreamSynchronize(b));
    verdict("ordered", holds(y, 1.0f), "B's copy after B waited for A's event holds A's values");

    // no_wait: the copy on B is not ordered after A's fill
    CHECK(cudaDeviceSynchronize());
    fill_kernel<<<4, 256, 0, a>>>(x, 2.0f);
    copy_kernel<<<4, 256, 0, b>>>(y, x);
    CHECK(cudaStreamSynchronize(b));
    if (runtime_order() == 0) {
        verdict("no_wait", holds(y, 1.0f), "without the wait, B's copy ran before A's fill (the buffer's old values)");
    } else {
        printf("SKIP streams no_wait: %s\n", kOnRuntime ? "CUDA_CPU_STREAMS=later exposes it" : "a race on a GPU (no result to check)");
    }
    CHECK(cudaDeviceSynchronize());

    // legacy: a blocking stream's work is ordered before the legacy stream's next work; a non-blocking one's is not
    fill_kernel<<<4, 256, 0, a>>>(x, 3.0f);
    copy_kernel<<<4, 256>>>(y, x);
    CHECK(cudaStreamSynchronize(0));
    verdict("legacy_blocking", holds(y, 3.0f), "the legacy stream's copy after a blocking stream's fill holds its values");
    CHECK(cudaDeviceSynchronize());
    fill_kernel<<<4, 256, 0, nb>>>(x, 4.0f);
    copy_kernel<<<4, 256>>>(y, x);
    CHECK(cudaStreamSynchronize(0));
    if (runtime_order() == 1) {
        verdict("legacy_nonblocking", holds(y, 3.0f), "the legacy stream's copy ran before a non-blocking stream's fill");
    } else {
        printf("SKIP streams legacy_nonblocking: %s\n", kOnRuntime ? "CUDA_CPU_STREAMS=earlier exposes it" : "a race on a GPU (no result to check)");
    }
    CHECK(cudaDeviceSynchronize());

    // event_sync: the event between two kernels of one stream (a non-blocking one: the check's own
    // cudaMemcpy, on the legacy stream, would otherwise run a blocking stream's work to its end)
    fill_kernel<<<4, 256>>>(y, 9.0f);
    CHECK(cudaDeviceSynchronize());
    fill_kernel<<<4, 256, 0, nb>>>(x, 5.0f);
    CHECK(cudaEventRecord(f, nb));
    fill_kernel<<<4, 256, 0, nb>>>(y, 6.0f);
    CHECK(cudaEventSynchronize(f));
    const int first_done = holds(x, 5.0f);
    const int second_waiting = !kOnRuntime || holds(y, 9.0f);
    verdict("event_sync", first_done && second_waiting,
            kOnRuntime ? "the event's sync ran the kernel before it and not the one after"
                       : "the event's sync ran the kernel before it");
    CHECK(cudaDeviceSynchronize());
    fill_kernel<<<4, 256, 0, a>>>(x, 7.0f);
    CHECK(cudaEventRecord(e, a));
    CHECK(cudaStreamWaitEvent(b, e, 0));
    copy_kernel<<<4, 256, 0, b>>>(y, x);
    CHECK(cudaStreamSynchronize(b));
    verdict("stream_sync_waits", holds(y, 7.0f), "a stream's sync ran the other stream's work its wait names");

    // query: a poll ends
    fill_kernel<<<4, 256, 0, a>>>(x, 8.0f);
    CHECK(cudaEventRecord(e, a));
    long long polls = 0;
    while (cudaEventQuery(e) == cudaErrorNotReady && polls < 100000000LL) { polls++; }
    cudaError_t q;
    while ((q = cudaStreamQuery(a)) == cudaErrorNotReady && polls < 200000000LL) { polls++; }
    verdict("query", q == cudaSuccess && holds(x, 8.0f), "polling cudaEventQuery, then cudaStreamQuery, ends with the work done");

#ifdef CUDACPU_CUDA_CPU_H
    // lazy_poison: both ends of 16 GiB read 0xFF; a value written at the end reads back
    {
        const size_t big = 16ull << 30;
        unsigned char* p = NULL;
        CHECK(cudaMalloc(&p, big));
        unsigned char ends[2] = {0, 0}, mark[4] = {1, 2, 3, 4}, back[4] = {0, 0, 0, 0};
        CHECK(cudaMemcpy(&ends[0], p, 1, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(&ends[1], p + big - 1, 1, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(p + big - 4, mark, 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(back, p + big - 4, 4, cudaMemcpyDeviceToHost));
        verdict("lazy_poison", ends[0] == 0xFF && ends[1] == 0xFF && memcmp(mark, back, 4) == 0,
                "a 16 GiB allocation reads 0xFF at both ends and keeps what was written at its end");
        CHECK(cudaFree(p));
    }
    // run_only: block 1 of 4 alone writes elements 256..511 (a grid-stride loop of 1024 threads)
    {
        CHECK(cudaMemset(x, 0, N * sizeof(float)));
        cudacpu::run_only("fill_kernel", dim3(1, 0, 0), dim3(1, 0, 0));
        fill_kernel<<<4, 256>>>(x, 9.0f);
        CHECK(cudaDeviceSynchronize());
        static float h[N];
        CHECK(cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost));
        int ok = 1;
        for (int i = 0; i < N; i++) { ok &= h[i] == (i >= 256 && i < 512 ? 9.0f + (float)i : 0.0f); }
        verdict("run_only", ok, "only the named block of fill_kernel ran");
        copy_kernel<<<4, 256>>>(y, x); // not named: the launch fails
        const cudaError_t err = cudaDeviceSynchronize();
        cudacpu::run_only_clear();
        verdict("run_only_unnamed", err != cudaSuccess, "a kernel run_only does not name fails its launch");
        printf("streams: %d failed\n", failures); // the error is sticky: nothing more runs
        return failures > 0 ? 1 : 0;
    }
#else
    printf("SKIP streams lazy_poison, run_only: the CPU runtime's own tools\n");
#endif
    CHECK(cudaEventDestroy(e));
    CHECK(cudaEventDestroy(f));
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    CHECK(cudaStreamDestroy(nb));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    printf("streams: %d failed\n", failures);
    return failures > 0 ? 1 : 0;
}
