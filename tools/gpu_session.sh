#!/usr/bin/env bash
# One GPU session of issue 44, as one command, within the device tool's 10 minutes.
#
# Where PyPI is reachable, first:   make gpu-wheels        (torchao into wheels/, gitignored)
# Then, on a CUDA host without network, from the repository root:
#     bash tools/gpu_session.sh
# With the device tool: run(command="bash tools/gpu_session.sh", carry=["wheels"], timeout_s=600).
# It writes under $OUT (default results/): bench-cuda-<gpu>.json, bench-gpu.log and
# nvidia-smi.txt. Commit the JSON under results/ only if its sections all ran (the log's
# "FAILED" and "not run" lines say otherwise): the pages render the newest run on a device.
# BENCH_ARGS adds options (BENCH_ARGS="--device cpu --quick" checks this script on a CPU).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python=${PYTHON:-python3}  # the host's Python with a CUDA build of torch

nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >>"$out/nvidia-smi.txt"
args=${BENCH_ARGS:-}
if [[ " $args " != *" --device cpu "* ]]; then
    "$python" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device"; print("torch", torch.__version__, torch.cuda.get_device_name())' || exit 1
fi
if ! ls wheels/*.whl >/dev/null 2>&1; then
    echo "gpu_session: no wheels/*.whl: FP8 training will be skipped unless torchao is installed (make gpu-wheels, then carry wheels/)" >&2
fi
# sections stop starting at 390 s, the cuda tests stop at 480 s; timeout is the last guard
# shellcheck disable=SC2086  # BENCH_ARGS is a list of options
timeout -k 10 -s INT 585 "$python" -m tools.bench_gpu --wheels wheels --out "$out" --budget 480 \
    $args 2>&1 | tee "$out/bench-gpu.log"
status=${PIPESTATUS[0]}
ls -l "$out"
exit "$status"
