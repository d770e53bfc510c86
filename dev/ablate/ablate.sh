#!/usr/bin/env bash
# `make ablate CONFIG=dev/ablate/<name>.txt [OUT=dir]`: the runner is dev/ablate/ablate.py (Python 3,
# standard library only: numbers parsed as numbers, every check before anything trains, each run's
# command checked by its trainer's --check_args 1); its header and dev/ablate/README.md say the rest.
#
#   bash dev/ablate/ablate.sh CONFIG [OUT]      OUT defaults to ablate_<config name>/ at the root
#   ABLATE_DEVICE=cpu|gpu  ABLATE_PLAN_ONLY=1  ABLATE_ESTIMATE=1 (plan-only: calibrate too)
#   ABLATE_RUNS="name ..."  FORCE=1 (train a plan estimated over 2 hours)  PYTHON (report.py's, with matplotlib)
#   CUDA_VISIBLE_DEVICES=0,2 (the GPUs, one run each at a time)  ABLATE_JOBS=N (runs at a time)
#   ABLATE_STATUS_S=60 (progress lines of runs in parallel)  ABLATE_TEST_FAKE_GPUS=1 (the tests' fake GPUs)
#
# The runner itself runs on /usr/bin/python3 (whatever PYTHON is: it needs no package), or where a
# machine has none (the GPU machine's Python may live in a virtual environment) the python3 on PATH.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "ablate: no /usr/bin/python3 and no python3 on PATH (HINT: install Python 3)" >&2; exit 1; }
exec "$py" "$(dirname "$0")/ablate.py" "$@"
