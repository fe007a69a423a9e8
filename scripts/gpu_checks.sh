#!/usr/bin/env bash
# GPU checks of 2026-11-26 that gpu_validate.py does not make (run on the device machine, results under $OUT):
#   1. record text-cuda-bs1024-fp32-sync-request (notebook 3's wrong way to time async GPU stages);
#   2. a CUDA stage past --timeout-s through `python -m workbench` (entry) and through main() alone: exit 1 both;
#   3. the CUDA-marked tests again, after the timeout test joins its abandoned stage thread: exit 0.
# Wheels the GPU machine lacks travel in .whl/ (the device tool's README says how).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/scripts PYTHONUNBUFFERED=1
python3 scripts/record_examples.py --device cuda --only text-cuda-bs1024-fp32-sync-request --out "$OUT/runs" 2>&1 | tail -3
(cd "$OUT" && tar czf sync_request.tar.gz runs && rm -rf runs)
A="profile --closed-loop --pipeline gpu_sleep_pipeline:build --device cuda --timeout-s 0.3 --requests 4 --warmup 0 --traced 0"
python3 -m workbench $A --out /tmp/r1 > "$OUT/entry.log" 2>&1; echo "entry (python -m workbench): exit $?" | tee -a "$OUT/checks.txt"
python3 -c "import sys; from workbench.cli import main; sys.exit(main(sys.argv[1:]))" $A --out /tmp/r2 > "$OUT/main.log" 2>&1
echo "main() without entry's exit path: exit $?" | tee -a "$OUT/checks.txt"
python3 -m pytest -m cuda -q -p no:cacheprovider tests/test_timing_cuda.py tests/examples/test_examples_cuda.py tests/test_precision.py > "$OUT/pytest_cuda.log" 2>&1
echo "pytest -m cuda: exit $?" | tee -a "$OUT/checks.txt"
tail -3 "$OUT/pytest_cuda.log"
