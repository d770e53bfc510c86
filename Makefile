# GPT-2 trainer with a compile-time Q/K/V scheme. `make help` lists the targets (the #? lines below).
#
#? make train [QKV=<scheme>]          prepare the data, build, train: d12 with the CUDA trainer on a GPU, else d2 with the CPU trainer (TRAIN_ARGS="..." adds flags)
#? make test                          every test this machine can run: the CPU, the CUDA trainer on the CPU runtime, a compile of every CUDA source, the GPU if any (dev/TESTING.md)
#? make train_gpt2cu [QKV=..] [PRECISION=BF16|FP32]  the CUDA trainer, ./train_gpt2cu[_<scheme>][_fp32]
#? make test_gpt2cu [QKV=..] [PRECISION=BF16|FP32]   its test against the reference's fixtures, ./test_gpt2cu[_<scheme>][_fp32]
#? make cpu [QKV=..]                  the CPU trainer build/train_gpt2_cpu_<scheme>, its test, and its test with the tiled attention
#? make build/train_gpt2_cpu_mpi_<scheme>   the CPU trainer over MPI: mpirun -np N runs one run on N processes (dev/trainer/data_parallel.h)
#? make labs [PRECISION=BF16|FP32]    the kernel labs build/lab_<op>[_fp32] (dev/cuda/README.md); make labs-list names them
#? make build/cudacpu/<binary>        test_gpt2cu_<scheme>[_fp32], train_gpt2cu_<scheme>[_fp32] or lab_<op>[_fp32] on the CPU runtime (no GPU)
#? make asan                          the CPU tools with ASan + UBSan in build/asan/ (make test runs their error paths)
#? make params                        parameter counts and KV-cache sizes of the papers' configurations (dev/SCHEMES.md)
#? make fuzz [FUZZ_SECONDS=600] [FUZZ_TARGETS="checkpoint ..."] [FUZZ_MERGE=1]  libFuzzer on every file parser (dev/fuzz/README.md)
#? make ablate CONFIG=dev/ablate/<name>.txt [OUT=dir] [FORCE=1]  every run x seed of an ablation config, one per GPU at a time, then its table and plot (dev/ablate/README.md)
#? make schemes                       the scheme names, in id order
#? make clean                         remove every build output
#
# Layout of this file: settings; the CUDA trainer (nvcc, then on the CPU runtime); the kernel labs;
# the CPU binaries and their sanitizer twins (one recipe); fuzzing; the commands.

# The schemes in id order, read from qkv_scheme_names in attention_variants.cuh, the one place a
# scheme is defined; scripts ask `make -s schemes` for the same list.
SCHEMES := $(shell sed -n '/qkv_scheme_names\[QKV_NUM_SCHEMES\] = {/,/};/p' attention_variants.cuh | grep -o '"[a-z0-9_]*"' | tr -d '"')
QKV ?= standard
PRECISION ?= BF16

ifeq ($(filter $(QKV),$(SCHEMES)),)
$(error QKV=$(QKV) is not a scheme; expected one of: $(SCHEMES))
endif
ifeq ($(filter $(PRECISION),BF16 FP32),)
$(error PRECISION=$(PRECISION) is not supported; expected BF16 or FP32)
endif

# -DQKV_SCHEME=QKV_<ID>: the enum constant of attention_variants.cuh
QKV_DEFINE = -DQKV_SCHEME=QKV_$(shell echo $(1) | tr a-z A-Z)
# binary suffix: none for standard BF16, _<scheme> otherwise, _fp32 for FP32 builds
SCHEME_SUFFIX = $(if $(filter standard,$(1)),,_$(1))
PRECISION_SUFFIX = $(if $(filter FP32,$(1)),_fp32,)
SUFFIX := $(call SCHEME_SUFFIX,$(QKV))$(call PRECISION_SUFFIX,$(PRECISION))

BUILD := build
CXX ?= g++
CXXFLAGS := -O2 -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-unused-function
OPENMP := -fopenmp

# the headers every trainer includes (the model, its files, the flags they share), and the tests'
# the trainers' own headers: dev/trainer/, one concern each (train_common.h includes them)
MODEL_HEADERS := attention_variants.cuh $(wildcard dev/trainer/*.h dev/trainer/*.cuh) dataloader.h tokenizer.h dev/tokenizer/unicode_tables.h
TEST_HEADERS := dev/test/debug_state.h dev/test/sampling_check.h

# ---------------------------------------------------------------------------------------------
# The CUDA trainer: sm_80 and sm_90, plus the local GPU's own architecture if there is one.
NVCC ?= /usr/local/cuda/bin/nvcc
CUDA_HOME ?= /usr/local/cuda
LOCAL_SM := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.')
CUDA_COMMA := ,
CUDA_ARCHS := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
              $(if $(filter-out 80 90,$(LOCAL_SM)),-gencode arch=compute_$(LOCAL_SM)$(CUDA_COMMA)code=sm_$(LOCAL_SM),)
NVCC_FLAGS := -O3 -std=c++17 -lineinfo $(CUDA_ARCHS) -Xcompiler -Wall
NVCC_LDFLAGS := -L$(CUDA_HOME)/lib64 -lcublasLt -Xlinker -rpath=$(CUDA_HOME)/lib64
# NCCL (data parallelism over GPUs, dev/trainer/data_parallel.h): the trainer and its test are built with it
# where nccl.h (2.14 or later) and libnccl are found, in NCCL_HOME (default CUDA_HOME, where the
# toolkit ships them; lib64/ or lib/) or in /usr (Debian's libnccl-dev). NO_NCCL=1 builds without: the trainer of one GPU,
# its flags -pi fs and -pn above 1 refused in one line. Nothing else changes between the two builds.
NCCL_HOME ?= $(CUDA_HOME)
NCCL_LIBDIR := $(firstword $(foreach d,$(NCCL_HOME)/lib64 $(NCCL_HOME)/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib,\
                 $(if $(wildcard $(d)/libnccl.so),$(d),)))
NCCL_INCDIR := $(firstword $(foreach d,$(NCCL_HOME)/include /usr/include,$(if $(wildcard $(d)/nccl.h),$(d),)))
# 2.14 or later: the non-blocking communicator dev/trainer/data_parallel.h waits on with its deadlines
NCCL_RECENT := $(if $(NCCL_INCDIR),$(shell awk '/^\#define NCCL_MAJOR/ { M = $$3 } /^\#define NCCL_MINOR/ { m = $$3 } \
                 END { if (M > 2 || (M == 2 && m >= 14)) print "yes" }' $(NCCL_INCDIR)/nccl.h),)
ifeq ($(NO_NCCL),1)
NCCL_FLAGS :=
else ifneq ($(and $(NCCL_LIBDIR),$(NCCL_INCDIR),$(NCCL_RECENT)),)
NCCL_FLAGS := -DDP_NCCL -I$(NCCL_INCDIR) -L$(NCCL_LIBDIR) -lnccl -Xlinker -rpath=$(NCCL_LIBDIR)
else
NCCL_FLAGS :=
endif
# fast math only for BF16: FP32 builds are held to 1e-4 against the reference (exact expf/tanhf)
PRECISION_DEFINE = $(if $(filter FP32,$(1)),-DENABLE_FP32,-DENABLE_BF16 --use_fast_math)

# `make train_gpt2cu QKV=s` names the binary of that scheme/precision; for standard BF16 (no
# suffix) the binary itself is the target, so it is not phony and rebuilds only when stale
ifneq ($(SUFFIX),)
.PHONY: train_gpt2cu test_gpt2cu
train_gpt2cu: train_gpt2cu$(SUFFIX)
test_gpt2cu: test_gpt2cu$(SUFFIX)
endif

train_gpt2cu$(SUFFIX): train_gpt2.cu $(MODEL_HEADERS)
	$(NVCC) $(NVCC_FLAGS) $(call QKV_DEFINE,$(QKV)) $(call PRECISION_DEFINE,$(PRECISION)) $< $(NVCC_LDFLAGS) $(NCCL_FLAGS) -o $@

test_gpt2cu$(SUFFIX): test_gpt2.cu train_gpt2.cu $(MODEL_HEADERS) $(TEST_HEADERS)
	$(NVCC) $(NVCC_FLAGS) $(call QKV_DEFINE,$(QKV)) $(call PRECISION_DEFINE,$(PRECISION)) $< $(NVCC_LDFLAGS) $(NCCL_FLAGS) -o $@

# The compile check of a scheme's trainer without ptxas (dev/test/test_cuda.sh where there is no GPU):
# build/ptx/train_gpt2cu_<scheme>[_fp32], PTX for compute_90 only. The device code does not depend on
# the scheme (the kernels read it as data), and standard's full builds run ptxas on it.
# The same for test_gpt2.cu (build/ptx/test_gpt2cu_<scheme>[_fp32]: its device code is train_gpt2.cu's).
# These compile without NCCL (the full builds have it where it is found), so both builds compile in CI.
PTX_NVCC = $(NVCC) $(filter-out -gencode arch=%,$(NVCC_FLAGS)) -gencode arch=compute_90,code=compute_90 \
           $(call QKV_DEFINE,$(patsubst %_fp32,%,$(1))) $(call PRECISION_DEFINE,$(if $(filter %_fp32,$(1)),FP32,BF16))
$(BUILD)/ptx/train_gpt2cu_%: train_gpt2.cu $(MODEL_HEADERS)
	@mkdir -p $(dir $@)
	$(call PTX_NVCC,$*) $< $(NVCC_LDFLAGS) -o $@
$(BUILD)/ptx/test_gpt2cu_%: test_gpt2.cu train_gpt2.cu $(MODEL_HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(call PTX_NVCC,$*) $< $(NVCC_LDFLAGS) -o $@

# The CUDA trainer on the CPU (dev/cudacpu/README.md): train_gpt2.cu and test_gpt2.cu as they are,
# through dev/cudacpu/rewrite.py (launches, inline PTX, __shared__), built with g++ against the CPU
# runtime dev/cudacpu/cuda_cpu.h: build/cudacpu/{test,train}_gpt2cu_<scheme>[_fp32]. No GPU needed.
CUDACPU := $(BUILD)/cudacpu
# Its trainers are NCCL builds whose NCCL is dev/cudacpu/nccl_cpu.h (processes of this machine).
CUDACPU_DEPS := dev/cudacpu/cuda_cpu.h dev/cudacpu/simt.h dev/cudacpu/hopper.h dev/cudacpu/weak_memory.h dev/cudacpu/runtime_api.h dev/cudacpu/cublaslt_cpu.h \
                dev/cudacpu/nccl_cpu.h $(MODEL_HEADERS)
# (-Wno-psabi: a kernel taking a CUtensorMap by value, 64-byte aligned, draws a note on GCC 4.6's ABI change;
# -Wno-unused-function: with a precompiled header g++ 12 reports every header's static functions that
# a binary does not use, the test's unused trainer paths among them; without one it reported none)
CUDACPU_BASE := -std=c++17 -O2 -g0 -fno-strict-aliasing -Wall -Wno-unknown-pragmas -Wno-unused-function -Wno-psabi \
                -I$(CUDA_HOME)/include -I. -Idev/cudacpu
# the runtime is force-included through a precompiled header (a quarter of a build's time was parsing it),
# one with the NCCL model (-DDP_NCCL: the trainers) and one without; where g++ finds a .gch unusable (the
# labs' -fopenmp), the header beside it includes cuda_cpu.h as text
CUDACPU_PCH := $(CUDACPU)/pch/cudacpu_pch.h
CUDACPU_PCH_NCCL := $(CUDACPU)/pch_nccl/cudacpu_pch.h
CUDACPU_FLAGS := $(CUDACPU_BASE) -x c++ -include $(CUDACPU_PCH)
CUDACPU_FLAGS_NCCL := $(CUDACPU_BASE) -DDP_NCCL -x c++ -include $(CUDACPU_PCH_NCCL)
$(CUDACPU)/pch/cudacpu_pch.h.gch: $(CUDACPU_DEPS)
	@mkdir -p $(dir $@)
	@echo '#include "cuda_cpu.h"' >$(CUDACPU_PCH)
	$(CXX) $(CUDACPU_BASE) -x c++-header $(CUDACPU_PCH) -o $@
$(CUDACPU)/pch_nccl/cudacpu_pch.h.gch: $(CUDACPU_DEPS)
	@mkdir -p $(dir $@)
	@echo '#include "cuda_cpu.h"' >$(CUDACPU_PCH_NCCL)
	$(CXX) $(CUDACPU_BASE) -DDP_NCCL -x c++-header $(CUDACPU_PCH_NCCL) -o $@
# both, made first by the scripts that then build several binaries at once (two makes must not race on one)
.PHONY: cudacpu-pch
cudacpu-pch: $(CUDACPU)/pch/cudacpu_pch.h.gch $(CUDACPU)/pch_nccl/cudacpu_pch.h.gch
# the stem is <scheme> or <scheme>_fp32
CUDACPU_DEFINES = $(call QKV_DEFINE,$(patsubst %_fp32,%,$(1))) $(if $(filter %_fp32,$(1)),-DENABLE_FP32,-DENABLE_BF16)

.PRECIOUS: $(CUDACPU)/src/%.cu $(CUDACPU)/src/%.cuh
$(CUDACPU)/src/%.cu: %.cu dev/cudacpu/rewrite.py
	@mkdir -p $(dir $@)
	python3 dev/cudacpu/rewrite.py $< $@
# the trainer's CUDA headers (dev/trainer/*.cuh: kernels and launchers outside train_gpt2.cu) are
# rewritten beside the rewritten trainer, whose includes find them there first
$(CUDACPU)/src/%.cuh: %.cuh dev/cudacpu/rewrite.py
	@mkdir -p $(dir $@)
	python3 dev/cudacpu/rewrite.py $< $@
CUDACPU_TRAINER_SRC := $(CUDACPU)/src/train_gpt2.cu $(addprefix $(CUDACPU)/src/,$(wildcard dev/trainer/*.cuh))

$(CUDACPU)/test_gpt2cu_%: $(CUDACPU)/src/test_gpt2.cu $(CUDACPU_TRAINER_SRC) $(CUDACPU_DEPS) $(TEST_HEADERS) $(CUDACPU_PCH).gch
	$(CXX) $(CUDACPU_FLAGS) $(call CUDACPU_DEFINES,$*) $< -o $@

$(CUDACPU)/train_gpt2cu_%: $(CUDACPU_TRAINER_SRC) $(CUDACPU_DEPS) $(CUDACPU_PCH_NCCL).gch
	$(CXX) $(CUDACPU_FLAGS_NCCL) $(call CUDACPU_DEFINES,$*) $< -o $@

# the runtime's own check of the inline PTX it models (ldmatrix, cp.async, mma.sync), on a GPU too
$(CUDACPU)/test_ptx: $(CUDACPU)/src/dev/cudacpu/test_ptx.cu $(CUDACPU_DEPS) $(CUDACPU_PCH).gch
	$(CXX) $(CUDACPU_FLAGS) $< -o $@
$(BUILD)/test_ptx: dev/cudacpu/test_ptx.cu | $(BUILD)
	$(NVCC) $(NVCC_FLAGS) $< $(NVCC_LDFLAGS) -o $@
# ... and of Hopper's asynchronous instructions (hopper.h: mbarrier, bulk tensor copies, wgmma, setmaxnreg),
# on an H100/H200 too: sm_90a, the architecture wgmma and setmaxnreg need
$(CUDACPU)/test_hopper: $(CUDACPU)/src/dev/cudacpu/test_hopper.cu $(CUDACPU_DEPS) $(CUDACPU_PCH).gch
	$(CXX) $(CUDACPU_FLAGS) $< -o $@
$(BUILD)/test_hopper: dev/cudacpu/test_hopper.cu | $(BUILD)
	$(NVCC) -O3 -std=c++17 -lineinfo -gencode arch=compute_90a,code=sm_90a -Xcompiler -Wall $< $(NVCC_LDFLAGS) -o $@
# ... and of streams and events (what CUDA orders, and what it leaves unordered run adversarially)
$(CUDACPU)/test_streams: $(CUDACPU)/src/dev/cudacpu/test_streams.cu $(CUDACPU_DEPS) $(CUDACPU_PCH).gch
	$(CXX) $(CUDACPU_FLAGS) $< -o $@
$(BUILD)/test_streams: dev/cudacpu/test_streams.cu | $(BUILD)
	$(NVCC) $(NVCC_FLAGS) $< $(NVCC_LDFLAGS) -o $@

# ---------------------------------------------------------------------------------------------
# Kernel labs (dev/cuda/README.md): dev/cuda/<op>.cu -> build/lab_<op>, build/lab_<op>_fp32 for
# PRECISION=FP32. A lab includes train_gpt2.cu (its kernels are the trainer's), its CPU reference and
# dev/cuda/common.h, and covers every scheme at run time, so QKV does not apply. The trainer's flags,
# but ONE architecture (compile time): the local GPU's, else sm_90; LAB_SM=<nn> picks another. OpenMP
# for the CPU reference.
LABS := attention_forward attention_backward
# BF16-only labs (their tolerances and byte counts are bf16's): built by `make labs` in BF16 only
LABS_BF16 := layernorm encoder_backward classifier matmul_gelu optimizer attention_decode
# dev/cuda/common.h, the flash versions the trainer does not hold, and the CPU references the labs include
LAB_HEADERS := dev/cuda/common.h dev/cuda/attention_flash_versions.h dev/cpu/attention_tiled_cpu.h dev/cpu/kernels_cpu.h
LAB_SM ?= $(if $(LOCAL_SM),$(LOCAL_SM),90)
# sm_90 builds for sm_90a, the target of wgmma and setmaxnreg (attention forward version 6), and says so
# to the host code (LAB_SM90A): its machine code runs on Hopper alone, as sm_90's does
LAB_ARCH = $(if $(filter 90,$(LAB_SM)),90a,$(LAB_SM))
LAB_NVCC_FLAGS = $(filter-out -gencode arch=%,$(NVCC_FLAGS)) -gencode arch=compute_$(LAB_ARCH)$(CUDA_COMMA)code=sm_$(LAB_ARCH) \
                 $(if $(filter 90,$(LAB_SM)),-DLAB_SM90A) -Xcompiler $(OPENMP)
LAB_DEPS := $(LAB_HEADERS) train_gpt2.cu $(MODEL_HEADERS)
.PHONY: labs labs-list
labs: $(addprefix $(BUILD)/lab_,$(addsuffix $(call PRECISION_SUFFIX,$(PRECISION)),$(LABS))) \
      $(if $(filter BF16,$(PRECISION)),$(addprefix $(BUILD)/lab_,$(LABS_BF16)))
labs-list:
	@echo $(LABS) / $(LABS_BF16)

# the _fp32 rule has the shorter stem, so make picks it for build/lab_<op>_fp32
$(BUILD)/lab_%_fp32: dev/cuda/%.cu $(LAB_DEPS) | $(BUILD)
	$(NVCC) $(LAB_NVCC_FLAGS) $(call PRECISION_DEFINE,FP32) $< $(NVCC_LDFLAGS) -lgomp -o $@

$(BUILD)/lab_%: dev/cuda/%.cu $(LAB_DEPS) | $(BUILD)
	$(NVCC) $(LAB_NVCC_FLAGS) $(call PRECISION_DEFINE,BF16) $< $(NVCC_LDFLAGS) -lgomp -o $@

# The labs' compile check without ptxas (dev/test/test_cuda.sh where there is no GPU):
# build/ptx/lab_<op>[_fp32], PTX for compute_90a only, as build/ptx/train_gpt2cu_<scheme>: a lab's
# device code is the trainer's (standard's full build runs ptxas on it) and its reference versions
# (compute_90a: the sm_90a ones too).
LAB_PTX_NVCC = $(NVCC) $(filter-out -gencode arch=%,$(NVCC_FLAGS)) -gencode arch=compute_90a,code=compute_90a -Xcompiler $(OPENMP)
$(BUILD)/ptx/lab_%_fp32: dev/cuda/%.cu $(LAB_DEPS)
	@mkdir -p $(dir $@)
	$(LAB_PTX_NVCC) $(call PRECISION_DEFINE,FP32) $< $(NVCC_LDFLAGS) -lgomp -o $@
$(BUILD)/ptx/lab_%: dev/cuda/%.cu $(LAB_DEPS)
	@mkdir -p $(dir $@)
	$(LAB_PTX_NVCC) $(call PRECISION_DEFINE,BF16) $< $(NVCC_LDFLAGS) -lgomp -o $@

# The labs on the CPU runtime: build/cudacpu/lab_<op>[_fp32], run with --check against their CPU
# references (dev/test/test_cudacpu.sh). The headers they include are rewritten beside them under
# build/cudacpu/src/dev/, so that a lab's `#include "../../train_gpt2.cu"` finds the rewritten trainer.
.PRECIOUS: $(CUDACPU)/src/%.h
$(CUDACPU)/src/%.h: %.h dev/cudacpu/rewrite.py
	@mkdir -p $(dir $@)
	python3 dev/cudacpu/rewrite.py $< $@
CUDACPU_LAB_DEPS := $(CUDACPU_DEPS) $(CUDACPU_TRAINER_SRC) $(addprefix $(CUDACPU)/src/,$(LAB_HEADERS)) $(CUDACPU_PCH).gch
$(CUDACPU)/lab_%_fp32: $(CUDACPU)/src/dev/cuda/%.cu $(CUDACPU_LAB_DEPS)
	$(CXX) $(CUDACPU_FLAGS) $(OPENMP) -DENABLE_FP32 $< -o $@
$(CUDACPU)/lab_%: $(CUDACPU)/src/dev/cuda/%.cu $(CUDACPU_LAB_DEPS)
	$(CXX) $(CUDACPU_FLAGS) $(OPENMP) -DENABLE_BF16 $< -o $@

# ---------------------------------------------------------------------------------------------
# The CPU binaries, built twice from the same rules: optimized in build/ and with ASan + UBSan in
# build/asan/ (dev/test/test_sanitize.sh runs the error paths of the twins: any UB fatal, -O1 -g for
# readable reports; OpenMP stays on so the trainer runs as it does in production).
#   <dir>/train_gpt2_cpu_<scheme>, test_gpt2_cpu_<scheme>, test_kv_cache_cpu_<scheme> (decode against the
#   full forward pass), and *_tiled_<scheme>: the same with -DATTENTION_TILED, the CPU twin of the
#   flash kernels (dev/cpu/attention_tiled_cpu.h) in place of the plain attention (make's
#   shortest-stem rule picks the tiled pattern for them); params, test_tokenizer, test_dataloader.
# The CPU trainer is the no-GPU training path: -O3 -march=native lets the compiler vectorize its layer
# loops (the binaries are built on the machine that runs them); -fno-math-errno lets it vectorize
# loops that call sqrt (AdamW).
# GCC 12.2 at -mtune=skylake* (what -march=native picks on an AVX-512 Xeon) miscompiles the parameter
# count of dev/trainer/parameters.h (its if-conversion of QKV_SHAPE's `present ? n : 0` reads stale flags: the
# checkpoint a trainer writes is one its own loader refuses); the fix is GCC 12.3, the workaround turns
# that if-conversion off, for GCC 12 only
CPU_CXXFLAGS := $(CXXFLAGS) -O3 -march=native -fno-math-errno \
                $(if $(filter 12.%,$(shell $(CXX) -dumpfullversion 2>/dev/null)),--param max-rtl-if-conversion-insns=1)
ASAN := $(BUILD)/asan
ASAN_CXXFLAGS := $(CXXFLAGS) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
CPU_TRAINER_DEPS := dev/cpu/train_gpt2_cpu.cpp dev/cpu/attention_tiled_cpu.h $(MODEL_HEADERS)

# the one recipe, $(call cpu_recipe,trainer) for a trainer binary (a scheme stem: OpenMP, the scheme,
# the tiled attention for *_tiled_*, the vectorizing flags) or $(call cpu_recipe,) for a tool; in
# build/asan/ both get the sanitizer flags
cpu_recipe = $(strip $(CXX) $(if $(filter $(ASAN)/%,$@),$(ASAN_CXXFLAGS),$(if $(1),$(CPU_CXXFLAGS),$(CXXFLAGS))) \
             $(if $(1),$(OPENMP) $(if $(findstring _tiled_,$(@F)),-DATTENTION_TILED) $(call QKV_DEFINE,$*)) $< -o $@ $(if $(1),-lm))
define cpu_binaries
$(1)/train_gpt2_cpu_%: $(CPU_TRAINER_DEPS) | $(1) ; $$(call cpu_recipe,trainer)
$(1)/train_gpt2_cpu_tiled_%: $(CPU_TRAINER_DEPS) | $(1) ; $$(call cpu_recipe,trainer)
$(1)/test_gpt2_cpu_%: dev/cpu/test_gpt2_cpu.cpp $(CPU_TRAINER_DEPS) $(TEST_HEADERS) | $(1) ; $$(call cpu_recipe,trainer)
$(1)/test_gpt2_cpu_tiled_%: dev/cpu/test_gpt2_cpu.cpp $(CPU_TRAINER_DEPS) $(TEST_HEADERS) | $(1) ; $$(call cpu_recipe,trainer)
$(1)/test_kv_cache_cpu_%: dev/cpu/test_kv_cache_cpu.cpp $(CPU_TRAINER_DEPS) $(TEST_HEADERS) | $(1) ; $$(call cpu_recipe,trainer)
$(1)/params: dev/tools/params.cpp $(MODEL_HEADERS) | $(1) ; $$(call cpu_recipe,)
$(1)/test_tokenizer: dev/tokenizer/test_tokenizer.cpp tokenizer.h dev/tokenizer/unicode_tables.h | $(1) ; $$(call cpu_recipe,)
$(1)/test_dataloader: dev/data/test_dataloader.cpp dataloader.h | $(1) ; $$(call cpu_recipe,)
$(1):
	mkdir -p $(1)
endef
$(foreach dir,$(BUILD) $(ASAN),$(eval $(call cpu_binaries,$(dir))))

# The CPU trainer over MPI (dev/trainer/data_parallel.h): the same source with -DDP_MPI, built by mpicxx
# (Debian: openmpi-bin libopenmpi-dev); mpirun -np N runs N processes of one run. Not part of `make
# cpu`: the plain CPU trainer needs no MPI.
MPICXX ?= mpicxx
$(BUILD)/train_gpt2_cpu_mpi_%: $(CPU_TRAINER_DEPS) | $(BUILD)
	@command -v $(MPICXX) >/dev/null || { echo "error: $(MPICXX) not found (HINT: apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
	$(MPICXX) $(CPU_CXXFLAGS) $(OPENMP) -DDP_MPI $(call QKV_DEFINE,$*) $< -o $@ -lm

.PHONY: cpu asan
cpu: $(BUILD)/train_gpt2_cpu_$(QKV) $(BUILD)/test_gpt2_cpu_$(QKV) $(BUILD)/test_gpt2_cpu_tiled_$(QKV)
asan: $(ASAN)/train_gpt2_cpu_standard $(ASAN)/test_gpt2_cpu_standard $(ASAN)/test_kv_cache_cpu_standard $(ASAN)/params \
      $(ASAN)/encode_text $(ASAN)/test_tokenizer $(ASAN)/test_dataloader

# the tiled attention against the plain one (unit test), and the speed of a step and of each layer
# function (dev/cpu/bench_cpu.cpp): the standard scheme
$(BUILD)/test_attention_tiled_cpu: dev/cpu/test_attention_tiled_cpu.cpp $(CPU_TRAINER_DEPS) | $(BUILD)
	$(CXX) $(CPU_CXXFLAGS) $(OPENMP) $< -o $@ -lm
$(BUILD)/bench_cpu: dev/cpu/bench_cpu.cpp $(CPU_TRAINER_DEPS) | $(BUILD)
	$(CXX) $(CPU_CXXFLAGS) $(OPENMP) $(call QKV_DEFINE,standard) $< -o $@ -lm

# tools outside the twins: the header unit test, the tokenizer benchmark, the text encoder (which
# dev/data's scripts run from dev/data/) and its sanitizer twin
$(BUILD)/test_attention_variants: dev/test/test_attention_variants.cpp attention_variants.cuh dev/trainer/parameters.h \
                                  dev/trainer/checkpoint.h dev/trainer/training_memory.h | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@
$(BUILD)/test_attention_maps: dev/test/test_attention_maps.cpp dev/trainer/attention_maps.h | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@
$(BUILD)/bench_tokenizer: dev/tokenizer/bench_tokenizer.cpp tokenizer.h dev/tokenizer/unicode_tables.h | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@
dev/data/encode_text: dev/data/encode_text.cpp tokenizer.h dev/tokenizer/unicode_tables.h dataloader.h
	$(CXX) $(CXXFLAGS) $< -o $@
$(ASAN)/encode_text: dev/data/encode_text.cpp tokenizer.h dev/tokenizer/unicode_tables.h dataloader.h | $(ASAN)
	$(CXX) $(ASAN_CXXFLAGS) $< -o $@

# ---------------------------------------------------------------------------------------------
# Fuzzing (dev/fuzz/README.md): one libFuzzer binary per parser a user can hand a file to, built with
# Debian's clang 14 under ASan and UBSan (a UBSan report is a crash). `make test` runs each for about
# 20 s (dev/test/test_fuzz.sh); `make fuzz` for FUZZ_SECONDS each.
FUZZ_TARGETS ?= checkpoint state debug_state dataloader tokenizer_bin bpe_files bpe_text
FUZZ_CXX ?= clang++
FUZZ_FLAGS := -g -O1 -std=c++17 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
              -fsanitize-coverage-ignorelist=dev/fuzz/coverage_ignore.txt -Wall -Wextra -Wno-unused-parameter -Wno-unused-function
FUZZ_DEPS := dev/fuzz/fuzz_common.h dev/fuzz/fuzz_bpe.h dev/fuzz/coverage_ignore.txt $(MODEL_HEADERS) dev/test/debug_state.h
FUZZ_SECONDS ?= 600
.PHONY: fuzz fuzz-build
fuzz-build: $(addprefix $(BUILD)/fuzz/fuzz_,$(FUZZ_TARGETS))
fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" bash dev/test/test_fuzz.sh

$(BUILD)/fuzz/fuzz_%: dev/fuzz/fuzz_%.cpp $(FUZZ_DEPS)
	@mkdir -p $(BUILD)/fuzz
	$(FUZZ_CXX) $(FUZZ_FLAGS) $< -o $@

# ---------------------------------------------------------------------------------------------
# The commands. make ablate trains every run of CONFIG on the GPU trainer if there is a GPU, one run
# per GPU at a time over every visible GPU, else on the CPU trainer (dev/ablate/README.md); OUT only
# from the command line (the environment's $OUT is not ours); FORCE=1 (command line or environment)
# trains a plan estimated over 2 hours.
.PHONY: help schemes nccl_flags params test train ablate clean
help:
	@sed -n 's/^#? //p' Makefile
	@echo "schemes (QKV=): $(SCHEMES)"

schemes:
	@echo $(SCHEMES)

# the NCCL flags of this machine's trainer build (empty: built without NCCL), for the tests
nccl_flags:
	@echo $(NCCL_FLAGS)

params: $(BUILD)/params
	@./$(BUILD)/params

test:
	@bash dev/test/run_all.sh

# make train and make ablate end with make: make passes its SIGTERM on to them, and setpriv gives them a
# SIGHUP when make itself dies (a SIGHUP or SIGKILL to make alone), which each takes as a stop: every
# trainer writes its checkpoint and nothing is left running. Under nohup that SIGHUP is ignored, as
# nohup asks. (exec: the recipe's shell gives way, so that make is the parent whose death counts.)
WITH_MAKE := $(shell command -v setpriv >/dev/null 2>&1 && echo setpriv --pdeathsig HUP)

train:
	@exec $(WITH_MAKE) bash dev/train/train.sh $(QKV)

ablate:
	@FORCE="$(FORCE)" exec $(WITH_MAKE) bash dev/ablate/ablate.sh "$(CONFIG)" $(if $(filter command line,$(origin OUT)),"$(OUT)")

clean:
	rm -rf $(BUILD) train_gpt2cu* test_gpt2cu* dev/data/encode_text
