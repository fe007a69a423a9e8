#!/usr/bin/env bash
# GPU checks of the trust and audit work (issues 9, 11) on the device machine; results under $OUT:
#   1. compare fp32 against bf16 on CUDA, interleaved (compare.json, exit code);
#   2. compare eager against the text example's cuda_graph option, interleaved;
#   3. audit --try: a fresh image run at batch 64 from pageable memory (the pinned-memory action is tried) and
#      the recorded launch-bound text run (twice the batch is tried), each as JSON.
# Wheels the GPU machine lacks travel in .whl/ (the device tool's README says how).
# Run folders go to gpu-scratch/ (git-ignored), named relative so the kept JSON names no machine path.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
W="python3 -m workbench"
timeout 120 $W compare --example text --device cuda --config precision=fp32 --config precision=bf16 --requests 600 --json \
    > "$OUT/compare_bf16.json" 2> "$OUT/compare_bf16.err"; echo "compare fp32/bf16 on cuda: exit $?" | tee -a "$OUT/checks.txt"
timeout 120 $W compare --example text --device cuda --config cuda_graph=false --config cuda_graph=true --requests 600 --json \
    > "$OUT/compare_graph.json" 2> "$OUT/compare_graph.err"; echo "compare eager/graph on cuda: exit $?" | tee -a "$OUT/checks.txt"
timeout 120 $W profile --closed-loop --example image --device cuda --batch-size 64 --option pin_memory=false --requests 40 --traced 2 \
    --out gpu-scratch/image-pageable > "$OUT/profile_pageable.txt" 2>&1; echo "profile image pageable: exit $?" | tee -a "$OUT/checks.txt"
timeout 150 $W audit gpu-scratch/image-pageable --try --try-requests 40 --json > "$OUT/audit_pageable.json" \
    2> "$OUT/audit_pageable.err"; echo "audit --try image pageable: exit $?" | tee -a "$OUT/checks.txt"
timeout 150 $W audit data/runs/text-cuda-bs1-fp32 --try --json > "$OUT/audit_text.json" 2> "$OUT/audit_text.err"
echo "audit --try text bs1: exit $?" | tee -a "$OUT/checks.txt"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for name in ("compare_bf16", "compare_graph"):
    try:
        r = json.load(open(f"{out}/{name}.json"))
    except Exception as exc:
        print(name, "unreadable:", exc); continue
    e = r["end_to_end"]; f = next(s for s in r["stages"] if s["name"] == "forward")
    print(name, "e2e p50 ratio", round(e["p50_ratio"], 3), e["p50_ci"], e["verdict"], "| forward", round(f["p50_ratio"], 3), f["verdict"])
for name in ("audit_pageable", "audit_text"):
    try:
        r = json.load(open(f"{out}/{name}.json"))
    except Exception as exc:
        print(name, "unreadable:", exc); continue
    print(name, json.dumps(r)[:1500])
PY
