# Sourced by the scripts that need PyTorch on a machine they do not know (dev/test/gpu_suite.sh,
# dev/test/test_cuda.sh): which Python has it. The GPU machine's plain `python3` is a virtual
# environment holding torch (/opt/torch/.venv/bin/python3) while /usr/bin/python3 may have none;
# a Debian CI machine has it in /usr/bin/python3 (python3-torch). So: probe, never hard-code.
#
#   source dev/test/torch_python.sh
#   py=$(torch_python) || echo "no Python here imports torch"
#
# torch_python prints the first of $PYTHON, python3, /usr/bin/python3 that imports torch (as
# given, not resolved), or nothing with status 1. Each probe costs an `import torch` (1-3 s): call
# it once and keep the answer.
torch_python() {
  local py
  for py in ${PYTHON:-} python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c 'import torch' >/dev/null 2>&1; then
      echo "$py"
      return 0
    fi
  done
  return 1
}
