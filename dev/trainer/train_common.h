/*
dev/trainer/train_common.h: the host-side code both trainers share, so that train_gpt2.cu (CUDA) and
dev/cpu/train_gpt2_cpu.cpp (CPU) take the same flags with the same meanings and read and write the
same files. It includes the headers of dev/trainer/, one concern each, in the order they build on
one another (below): the command line (flags.h: TrainArgs, -h, parsing, the dN depth presets, the
learning-rate schedule), the checks before the first step (run_checks.h), the training loop's
bookkeeping (run.h, step_guard.h), model and training-state files (checkpoint.h,
checkpoint_files.h; dev/FORMATS.md), sampling and generation (sampling.h, generate.h) and data
parallelism (data_parallel.h). The training loop itself (train_loop.h) each trainer includes later,
after its --profile marks.

Plain C++ with no GPU code. The includer defines, before including:
  PRECISION_NAME, PRECISION_IS_BF16   its parameter precision ("fp32"/0 on the CPU)
  TRAIN_COMMON_CUDA                   1 in the CUDA trainer: its own flags (-r, -w, --attention,
                                      --gelu_fusion, --bias_fusion) are accepted; the CPU trainer refuses them
and defines after it
  static int trainer_shape_check(const TrainArgs* a, char* msg, size_t msg_size);
                                      what its own kernels need of a shape beyond gpt2_config_check
*/
#ifndef TRAIN_COMMON_H
#define TRAIN_COMMON_H

#if !defined(PRECISION_NAME) || !defined(PRECISION_IS_BF16) || !defined(TRAIN_COMMON_CUDA)
#error "define PRECISION_NAME, PRECISION_IS_BF16 and TRAIN_COMMON_CUDA before including dev/trainer/train_common.h"
#endif

// by concern, each including what it needs
#include "host.h"         // clock, main.log, files written under a temporary name
#include "sampling.h"     // --temperature, --top_k, --top_p and the sampling RNG
#include "checkpoint_files.h" // model and training-state files, and the values in them
#include "data_parallel.h" // processes and their collectives (-pn, -pi, -z)
#include "step_guard.h"   // whether a step's update is applied (non-finite, -sl, -sg)
#include "flags.h"        // TrainArgs, -h, the parser, the dN presets, the schedule
#include "run_checks.h"   // every check before the first step (-o, the resume, the data)
#include "run.h"          // the training loop's bookkeeping: signals, when to validate, sample, checkpoint
#include "generate.h"     // --generate and the inspection run

#endif // TRAIN_COMMON_H
