/*
runtime_api.h: the CUDA runtime functions the trainer calls, defined against the declarations of
CUDA's own cuda_runtime_api.h (included by cuda_cpu.h, which includes this file). Every function
that touches the device goes through the device queue of cuda_cpu.h; see its header for the model.
*/
#ifndef CUDACPU_RUNTIME_API_H
#define CUDACPU_RUNTIME_API_H

namespace cudacpu {

// an H100 SXM's numbers (cudaGetDeviceProperties, cudaDeviceGetAttribute)
static cudaDeviceProp h100_properties() {
    cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "NVIDIA H100 80GB HBM3 (dev/cudacpu on the CPU)");
    p.totalGlobalMem = kDeviceMemoryBytes;
    p.sharedMemPerBlock = 48 * 1024;
    p.regsPerBlock = 65536;
    p.warpSize = 32;
    p.memPitch = 2147483647;
    p.maxThreadsPerBlock = 1024;
    p.maxThreadsDim[0] = 1024; p.maxThreadsDim[1] = 1024; p.maxThreadsDim[2] = 64;
    p.maxGridSize[0] = 2147483647; p.maxGridSize[1] = 65535; p.maxGridSize[2] = 65535;
    p.totalConstMem = 65536;
    p.major = 9;
    p.minor = 0;
    p.textureAlignment = 512;
    p.multiProcessorCount = 132;
    p.integrated = 0;
    p.canMapHostMemory = 1;
    p.concurrentKernels = 1;
    p.ECCEnabled = 1;
    p.pciBusID = 0;
    p.asyncEngineCount = 3;
    p.unifiedAddressing = 1;
    p.memoryBusWidth = 5120;
    p.l2CacheSize = 50 * 1024 * 1024;
    p.persistingL2CacheMaxSize = 32 * 1024 * 1024;
    p.maxThreadsPerMultiProcessor = 2048;
    p.sharedMemPerMultiprocessor = 233472;
    p.regsPerMultiprocessor = 65536;
    p.managedMemory = 1;
    p.sharedMemPerBlockOptin = kSmemOptinMax;
    p.maxBlocksPerMultiProcessor = 32;
    p.reservedSharedMemPerBlock = 1024;
    return p;
}

static cudaError_t check_sticky() { return sticky_error != cudaSuccess ? sticky_error : cudaSuccess; }

// a copy's direction from its pointers (cudaMemcpyDefault), checked against the declared kind
static cudaError_t copy_check(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    const bool dst_dev = is_device(dst, n), src_dev = is_device(src, n);
    switch (kind) {
    case cudaMemcpyHostToDevice: if (!dst_dev || src_dev) { return cudaErrorInvalidValue; } break;
    case cudaMemcpyDeviceToHost: if (dst_dev || !src_dev) { return cudaErrorInvalidValue; } break;
    case cudaMemcpyDeviceToDevice: if (!dst_dev || !src_dev) { return cudaErrorInvalidValue; } break;
    case cudaMemcpyHostToHost: if (dst_dev || src_dev) { return cudaErrorInvalidValue; } break;
    case cudaMemcpyDefault: break;
    default: return cudaErrorInvalidMemcpyDirection;
    }
    // a pointer that looks like device memory but is not inside one allocation: past the end
    if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) && !dst_dev) { return cudaErrorInvalidValue; }
    return cudaSuccess;
}

} // namespace cudacpu

extern "C" {

const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorLaunchFailure: return "unspecified launch failure (dev/cudacpu: the kernel error above)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    default: return "CUDA error (dev/cudacpu)";
    }
}
const char* cudaGetErrorName(cudaError_t e) { return cudaGetErrorString(e); }

cudaError_t cudaGetLastError(void) {
    const cudaError_t e = cudacpu::sticky_error != cudaSuccess ? cudacpu::sticky_error : cudacpu::last_error;
    cudacpu::last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) {
    return cudacpu::sticky_error != cudaSuccess ? cudacpu::sticky_error : cudacpu::last_error;
}

cudaError_t cudaGetDeviceCount(int* count) { *count = 1; return cudaSuccess; }
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudacpu::set_last(cudaErrorInvalidDevice); }
cudaError_t cudaGetDevice(int* device) { *device = 0; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
    if (device != 0) { return cudacpu::set_last(cudaErrorInvalidDevice); }
    *prop = cudacpu::h100_properties();
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
    if (device != 0) { return cudacpu::set_last(cudaErrorInvalidDevice); }
    const cudaDeviceProp p = cudacpu::h100_properties();
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = p.warpSize; return cudaSuccess;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; return cudaSuccess;
    default: return cudacpu::set_last(cudaErrorInvalidValue);
    }
}
cudaError_t cudaDeviceSynchronize(void) {
    cudacpu::drain();
    return cudacpu::check_sticky();
}
cudaError_t cudaDeviceReset(void) {
    cudacpu::drain();
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------------
// memory
cudaError_t cudaMalloc(void** ptr, size_t size) {
    if (cudacpu::sticky_error != cudaSuccess) { return cudacpu::sticky_error; }
    if (size > cudacpu::kDeviceMemoryBytes - cudacpu::device_bytes_in_use) {
        *ptr = nullptr;
        return cudacpu::set_last(cudaErrorMemoryAllocation);
    }
    cudacpu::Allocation a;
    unsigned char* p = cudacpu::guarded_alloc(size, &a);
    if (p == nullptr) { *ptr = nullptr; return cudacpu::set_last(cudaErrorMemoryAllocation); }
    a.pinned = false;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    // 0xFF, a NaN in fp32 and bf16: what no kernel wrote reads as NaN
    if (size >= cudacpu::kLazyPoisonBytes) {
        cudacpu::poison_pages(a.map + page, a.map_len - 2 * page);
    } else {
        memset(p, 0xFF, size);
    }
    cudacpu::allocations[(uintptr_t)p] = a;
    cudacpu::weak::region_add(a.map + page, a.map_len - 2 * page); // its pages between the guards, read-only (weak_memory.h)
    cudacpu::device_bytes_in_use += size;
    *ptr = p;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void** ptr, size_t size) {
    cudacpu::drain(); // cudaMallocHost synchronizes with the device
    cudacpu::Allocation a;
    unsigned char* p = cudacpu::guarded_alloc(size, &a);
    if (p == nullptr) { *ptr = nullptr; return cudacpu::set_last(cudaErrorMemoryAllocation); }
    a.pinned = true;
    memset(p, 0xFF, size);
    cudacpu::allocations[(uintptr_t)p] = a;
    *ptr = p;
    return cudaSuccess;
}
static cudaError_t cudacpu_free(void* ptr, bool pinned) {
    if (ptr == nullptr) { return cudaSuccess; }
    cudacpu::drain(); // cudaFree synchronizes with the device
    auto it = cudacpu::allocations.find((uintptr_t)ptr);
    if (it == cudacpu::allocations.end() || it->second.pinned != pinned) {
        return cudacpu::set_last(pinned ? cudaErrorInvalidValue : cudaErrorInvalidDevicePointer);
    }
    if (!pinned) {
        cudacpu::device_bytes_in_use -= it->second.bytes;
        cudacpu::weak::region_drop(it->second.map + (size_t)sysconf(_SC_PAGESIZE));
    }
    cudacpu::red_zones_drop(it->second.map, it->second.map + it->second.map_len);
    munmap(it->second.map, it->second.map_len);
    cudacpu::allocations.erase(it);
    return cudacpu::check_sticky();
}
cudaError_t cudaFree(void* ptr) { return cudacpu_free(ptr, false); }
cudaError_t cudaFreeHost(void* ptr) { return cudacpu_free(ptr, true); }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    *total_bytes = cudacpu::kDeviceMemoryBytes;
    *free_bytes = cudacpu::kDeviceMemoryBytes - cudacpu::device_bytes_in_use;
    return cudaSuccess;
}

// synchronous, on the legacy stream: what it waits for runs first (not a non-blocking stream's work)
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
    const cudaError_t e = cudacpu::copy_check(dst, src, count, kind);
    if (e != cudaSuccess) { return cudacpu::set_last(e); }
    cudacpu::legacy_sync();
    if (cudacpu::sticky_error != cudaSuccess) { return cudacpu::sticky_error; }
    if (count) { memmove(dst, src, count); }
    return cudaSuccess;
}

// Asynchronous: queued. Pageable host memory is staged at the call (CUDA copies a pageable source
// before returning, and a pageable destination makes the call synchronous); pinned memory is read
// or written when the copy runs, and a pinned destination holds NaN until then.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
    const cudaError_t e = cudacpu::copy_check(dst, src, count, kind);
    if (e != cudaSuccess) { return cudacpu::set_last(e); }
    if (cudacpu::sticky_error != cudaSuccess) { return cudacpu::sticky_error; }
    cudacpu::Stream* s = cudacpu::stream_of(stream);
    const bool src_pageable = !cudacpu::is_device(src, count) && !cudacpu::is_pinned(src, count);
    const bool dst_pageable = !cudacpu::is_device(dst, count) && !cudacpu::is_pinned(dst, count);
    if (dst_pageable) { // synchronous in effect: its stream runs up to it, then the copy
        cudacpu::enqueue_on(s, [dst, src, count]() { if (count) { memmove(dst, src, count); } });
        cudacpu::run_stream(s);
        return cudacpu::check_sticky();
    }
    if (src_pageable) {
        std::vector<unsigned char> staged((const unsigned char*)src, (const unsigned char*)src + count);
        cudacpu::enqueue_on(s, [dst, staged]() { if (!staged.empty()) { memcpy(dst, staged.data(), staged.size()); } });
        return cudaSuccess;
    }
    if (cudacpu::is_pinned(dst, count)) { memset(dst, 0xFF, count); } // undefined until the copy runs
    cudacpu::enqueue_on(s, [dst, src, count]() { if (count) { memmove(dst, src, count); } });
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
    if (!cudacpu::is_device(ptr, count)) { return cudacpu::set_last(cudaErrorInvalidValue); }
    cudacpu::enqueue_on(cudacpu::stream_of(stream), [ptr, value, count]() { memset(ptr, value, count); });
    return cudacpu::check_sticky();
}
cudaError_t cudaMemset(void* ptr, int value, size_t count) { return cudaMemsetAsync(ptr, value, count, 0); }

// ---------------------------------------------------------------------------------------------
// streams and events (cuda_cpu.h's queues): an event is a position in the stream it was recorded on.
// A record also queues a time stamp, taken when the stream reaches it: cudaEventElapsedTime then gives
// the host time the work between two records took to run (--profile's rows on the CPU runtime).
struct CUevent_st {
    cudacpu::Stream* stream = nullptr; // where it was last recorded; null: never recorded
    long long position = -1;           // that stream's items up to and including the record
    double ms = -1.0;                  // the stamp (CLOCK_MONOTONIC, ms); -1 until the stream reached the record
};
cudaError_t cudaEventCreate(cudaEvent_t* event) { *event = new CUevent_st(); return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) { (void)flags; return cudaEventCreate(event); }
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    if (event == nullptr) { return cudacpu::set_last(cudaErrorInvalidResourceHandle); }
    if (event->stream != nullptr) { cudacpu::run_until(event->stream, event->position); } // a pending stamp writes into it
    delete event;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    if (event == nullptr) { return cudacpu::set_last(cudaErrorInvalidResourceHandle); }
    event->ms = -1.0;
    cudacpu::Stream* s = cudacpu::stream_of(stream);
    cudacpu::enqueue_on(s, [event]() {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        event->ms = 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec + cudacpu::modelled_ms;
    });
    event->stream = s;
    event->position = s->issued;
    return cudacpu::check_sticky();
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    if (event == nullptr) { return cudacpu::set_last(cudaErrorInvalidResourceHandle); }
    if (event->stream != nullptr) { cudacpu::run_until(event->stream, event->position); }
    return cudacpu::check_sticky();
}
// runs what the event waits for (nothing here runs by itself, so a poll that only looked would never end)
cudaError_t cudaEventQuery(cudaEvent_t event) { return cudaEventSynchronize(event); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (start == nullptr || end == nullptr || start->position < 0 || end->position < 0) {
        return cudacpu::set_last(cudaErrorInvalidResourceHandle);
    }
    if (start->ms < 0.0 || end->ms < 0.0) { return cudacpu::set_last(cudaErrorNotReady); }
    *ms = (float)(end->ms - start->ms);
    return cudaSuccess;
}
// an outside profiler's capture window (ncu --profile-from-start off): nothing to capture here
cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
cudaError_t cudaProfilerStop(void) { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
    cudacpu::legacy_stream();
    cudacpu::Stream* s = new cudacpu::Stream{cudacpu::streams_created++, (flags & cudaStreamNonBlocking) == 0, {}, 0, 0};
    cudacpu::streams.push_back(s);
    *stream = new CUstream_st{s};
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }
// its work still runs (as on a GPU); the handle is gone
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
        return cudacpu::set_last(cudaErrorInvalidResourceHandle);
    }
    cudacpu::Stream* s = stream->s;
    cudacpu::run_stream(s);
    cudacpu::streams.erase(std::find(cudacpu::streams.begin(), cudacpu::streams.end(), s));
    delete s;
    delete stream;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    cudacpu::run_stream(cudacpu::stream_of(stream));
    return cudacpu::check_sticky();
}
// the stream waits, on the device, for the event's work (an event never recorded: nothing)
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    (void)flags;
    if (event == nullptr) { return cudacpu::set_last(cudaErrorInvalidResourceHandle); }
    if (event->stream != nullptr) { cudacpu::push_wait(cudacpu::stream_of(stream), event->stream, event->position); }
    return cudacpu::check_sticky();
}
// runs the stream's work (a poll that only looked would never end here)
cudaError_t cudaStreamQuery(cudaStream_t stream) { return cudaStreamSynchronize(stream); }

// ---------------------------------------------------------------------------------------------
// kernels' attributes and occupancy
cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || value > cudacpu::kSmemOptinMax) { return cudacpu::set_last(cudaErrorInvalidValue); }
        cudacpu::kernel_attrs[func].max_dynamic_smem = value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) { return cudaSuccess; }
    return cudacpu::set_last(cudaErrorInvalidValue);
}
// threads and shared memory only (registers are the compiler's, unknown here)
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* num_blocks, const void* func, int block_size,
                                                                    size_t dynamic_smem, unsigned int flags) {
    (void)func; (void)flags;
    if (block_size <= 0 || block_size > 1024) { *num_blocks = 0; return cudacpu::set_last(cudaErrorInvalidValue); }
    int by_threads = 2048 / (((block_size + 31) / 32) * 32);
    const size_t per_block = dynamic_smem + 1024; // + the kernel's static shared memory, unknown before it runs
    int by_smem = (int)(233472 / per_block);
    int n = std::min(std::min(by_threads, by_smem), 32);
    *num_blocks = n;
    return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* num_blocks, const void* func, int block_size, size_t dynamic_smem) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(num_blocks, func, block_size, dynamic_smem, 0);
}

// Tensor maps (cuTensorMapEncodeTiled, tile mode) for the bulk tensor copies of hopper.h: every rule
// of cuda.h's documentation that a tile map of these types must meet, checked as the driver does
// (CUDA_ERROR_INVALID_VALUE), with a line on stderr naming the rule; interleaved layouts and the
// packed types are not modelled (refused the same way).
CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* addr, const cuuint64_t* dim,
                                const cuuint64_t* strides, const cuuint32_t* box, const cuuint32_t* estrides,
                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                CUtensorMapFloatOOBfill oob) {
    (void)l2;
    auto refuse = [](const char* why) {
        fprintf(stderr, "cuda-cpu: cuTensorMapEncodeTiled: %s\n", why);
        return CUDA_ERROR_INVALID_VALUE;
    };
    int elem = 0;
    switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: elem = 1; break;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16: case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: elem = 2; break;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: case CU_TENSOR_MAP_DATA_TYPE_INT32: case CU_TENSOR_MAP_DATA_TYPE_FLOAT32: elem = 4; break;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64: case CU_TENSOR_MAP_DATA_TYPE_INT64: case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: elem = 8; break;
    default: return refuse("data type not modelled (integer and float types of 1 to 8 bytes are)");
    }
    if (map == nullptr || (uintptr_t)map % 64 != 0) { return refuse("the tensor map's address must be 64-byte aligned"); }
    if (rank < 1 || rank > 5) { return refuse("rank must be 1 to 5"); }
    if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) { return refuse("interleaved layouts are not modelled"); }
    if (addr == nullptr || (uintptr_t)addr % 16 != 0) { return refuse("globalAddress must be 16-byte aligned"); }
    if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && type != CU_TENSOR_MAP_DATA_TYPE_FLOAT16 &&
        type != CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 && type != CU_TENSOR_MAP_DATA_TYPE_FLOAT32 && type != CU_TENSOR_MAP_DATA_TYPE_FLOAT64) {
        return refuse("the NaN fill needs a floating-point type");
    }
    cudacpu::TensorMapPacked t;
    memset(&t, 0, sizeof t);
    t.magic = cudacpu::kTensorMapMagic;
    t.addr = (uint64_t)(uintptr_t)addr;
    t.dtype = (uint8_t)type;
    t.rank = (uint8_t)rank;
    t.elem = (uint8_t)elem;
    t.interleave = (uint8_t)interleave;
    t.swizzle = (uint8_t)swizzle;
    t.oob = (uint8_t)oob;
    for (cuuint32_t d = 0; d < rank; d++) {
        if (dim[d] == 0 || dim[d] > (1ull << 32)) { return refuse("globalDim must be 1 to 2^32"); }
        if (box[d] == 0 || box[d] > 256) { return refuse("boxDim must be 1 to 256"); }
        if (estrides[d] == 0 || estrides[d] > 8) { return refuse("elementStrides must be 1 to 8"); }
        if (d > 0 && estrides[d] != 1) { return refuse("elementStrides other than 1 are not modelled"); }
        t.dim[d] = dim[d];
        t.box_m1[d] = (uint8_t)(box[d] - 1);
        t.estride[d] = (uint8_t)estrides[d];
        if (d + 1 < rank) {
            if (strides[d] % 16 != 0 || strides[d] >= (1ull << 40)) { return refuse("globalStrides must be multiples of 16 below 2^40"); }
            t.stride[d] = strides[d];
        }
    }
    if (box[0] * (cuuint32_t)elem % 16 != 0) { return refuse("boxDim[0] * the element size must be a multiple of 16 bytes"); }
    const cuuint32_t span = swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64 : swizzle == CU_TENSOR_MAP_SWIZZLE_NONE ? 0 : 128;
    if (span && box[0] * (cuuint32_t)elem > span) { return refuse("the box's inner dimension in bytes must not exceed the swizzle span"); }
    memset(map, 0, sizeof *map);
    memcpy(map, &t, sizeof t);
    return CUDA_SUCCESS;
}

// how a program reaches the driver's cuTensorMapEncodeTiled without linking libcuda
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status) {
    (void)version; (void)flags;
    if (symbol != nullptr && strcmp(symbol, "cuTensorMapEncodeTiled") == 0) {
        *fn = (void*)&cuTensorMapEncodeTiled;
        if (status) { *status = cudaDriverEntryPointSuccess; }
        return cudaSuccess;
    }
    *fn = nullptr;
    if (status) { *status = cudaDriverEntryPointSymbolNotFound; }
    return cudaSuccess;
}

} // extern "C"

// CUDA's C++ overload for a kernel (a template instance included), which nvcc's headers give only to nvcc
template <class... P>
static inline cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), enum cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute((const void*)kernel, attr, value);
}

#endif // CUDACPU_RUNTIME_API_H
