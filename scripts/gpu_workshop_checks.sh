#!/usr/bin/env bash
# The workshop's CUDA paths on the device machine (issue 30; issue 25's slow-request traces on CUDA);
# results under $OUT. Wheels the GPU machine lacks travel in .whl/ (the device tool's README says how).
#   1. profile the text example on the GPU at batch 1 (defaults: 50 traced slow requests, stack sampling);
#   2. show --json and analyze --json of it (stacks of the slow requests, the cold start split off);
#   3. load: the live batcher on the GPU, 2 ms max wait (batch wait vs executor wait);
#   4. scripts/gpu_workshop_checks.py: the record names the card; the explorer and the static page say
#      "recorded on <card>"; the flame graph's GPU panel; the explorer's live path on CUDA; the queueing split;
#   5. the CUDA-marked tests.
# Run folders go to gpu-scratch/ (git-ignored), named relative so the kept JSON names no machine path.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
W="python3 -m workbench"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/checks.txt"
rm -rf gpu-scratch && mkdir -p gpu-scratch
timeout 240 $W profile --example text --device cuda --batch-size 1 --requests 400 --out gpu-scratch/text-cuda-bs1-fp32 \
    > "$OUT/profile_text.txt" 2>&1; echo "profile text cuda bs1: exit $?" | tee -a "$OUT/checks.txt"
$W show gpu-scratch/text-cuda-bs1-fp32 --json > "$OUT/show_text.json" 2>> "$OUT/checks.txt"
$W analyze gpu-scratch/text-cuda-bs1-fp32/*.pt.trace.json.gz --json > "$OUT/analyze_text.json" 2>> "$OUT/checks.txt"
timeout 120 $W load --example text --device cuda --rate 300 --max-wait-ms 2 --max-batch-size 8 --duration 10 --json \
    --out gpu-scratch/load-text-cuda > "$OUT/load_text.json" 2> "$OUT/load_text.err"; echo "load text cuda: exit $?" | tee -a "$OUT/checks.txt"
timeout 240 python3 scripts/gpu_workshop_checks.py --run gpu-scratch/text-cuda-bs1-fp32 --load "$OUT/load_text.json" \
    --max-wait-ms 2 --show "$OUT/show_text.json" --analyze "$OUT/analyze_text.json" --md "$OUT/checks.md" 2>&1 | tee -a "$OUT/checks.txt"
timeout 200 python3 -m pytest -m cuda -q -p no:cacheprovider tests/test_timing_cuda.py tests/examples/test_examples_cuda.py tests/test_precision.py > "$OUT/pytest_cuda.log" 2>&1
echo "pytest -m cuda: exit $?" | tee -a "$OUT/checks.txt"; tail -3 "$OUT/pytest_cuda.log"
