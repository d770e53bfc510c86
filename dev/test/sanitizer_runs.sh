# The command lines of the trainer's compute-sanitizer runs, sourced by dev/test/gpu_suite.sh (its
# sanitize stages) and dev/test/gpu_sanitize_recheck.sh (the short re-check call), so that a re-check
# runs exactly what the stage runs. Defines names only; run nothing when sourced.
#
#   sanitizer_prepare_shard [RUNNER...]           the tiny token shard every run reads (SAN_SHARD)
#   sanitizer_build_shim CUDA_HOME [RUNNER...]    the LD_PRELOAD shim of the initcheck runs (SAN_SHIM)
# (RUNNER: a command to run them through, e.g. gpu_suite.sh's `x`, which only prints in a dry run;
# build/gpu_suite must exist)
#   sanitizer_tool_args TOOL         -> SAN_TOOL_ARGS: compute-sanitizer's flags after its path
#   sanitizer_env_args TOOL REGIONS  -> SAN_ENV_ARGS: what goes before it (initcheck: the shim)
#   sanitizer_trainer_args TOOL FIXTURE OUT_DIR -> SAN_TRAINER_ARGS: the trainer's flags after its path

SAN_SHARD=build/gpu_suite/sanitize_shard_000.bin
SAN_SHIM=build/gpu_suite/initcheck_lt_regions.so

sanitizer_prepare_shard() { # [runner...]
  "$@" python3 dev/test/tiny_shard.py "$SAN_SHARD" $((4 * 80 * 8 + 1)) 7
}

sanitizer_build_shim() { # cuda_home [runner...]
  local cuda_home=$1
  shift
  "$@" gcc -shared -fPIC -O2 -I"$cuda_home/include" dev/test/initcheck_lt_regions.c -o "$SAN_SHIM" -ldl
}

sanitizer_tool_args() { # tool
  SAN_TOOL_ARGS=(--tool "$1" --error-exitcode 99)
  if [ "$1" = initcheck ]; then
    # every report printed, without backtraces (dev/test/initcheck_filter.py reads them all);
    # --nvtx yes: the shim marks cuBLASLt's outputs initialized (NVTX memory API), so that our
    # kernels' reads of them are not reported (they overflowed the tool's record buffer on 2026-11-26)
    SAN_TOOL_ARGS+=(--print-limit 100000000 --show-backtrace no --nvtx yes)
  else
    SAN_TOOL_ARGS+=(--print-limit 20)
  fi
}

sanitizer_env_args() { # tool regions_file
  SAN_ENV_ARGS=()
  # the shim records the regions cuBLASLt writes into the file, and marks them
  [ "$1" = initcheck ] && SAN_ENV_ARGS=(env LD_PRELOAD="$PWD/$SAN_SHIM" LT_REGIONS_FILE="$2")
  return 0
}

sanitizer_trainer_args() { # tool fixture out_dir
  local shape=(-b 4 -t 32 -d 256)
  case $2 in *_hd64*) shape=(-b 4 -t 80 -d 640);; esac # T 80: a full and a partial 64-row tile
  local run=(-x 3 -v 3 -m 1 -s 3 -g 8 -n 3 -o "$3") # accumulation, validation, a sample, a checkpoint
  [ "$1" = initcheck ] && run=(-x 1 -v 0 -s 0)      # one step: the slow tool
  # racecheck: one step and an 8-token sample (the decode kernels); 3 steps took 28-72 s each with
  # 13 runs at once on the 2026-11-26 H200, and 10 of those runs were killed
  [ "$1" = racecheck ] && run=(-x 1 -v 0 -s 1 -g 8)
  SAN_TRAINER_ARGS=(-e "dev/fixtures/$2_model.bin" -i "$SAN_SHARD" -j "$SAN_SHARD" "${shape[@]}" "${run[@]}")
}
