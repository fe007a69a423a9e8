#!/bin/bash
# Issue 36's check: a fresh clone with the runtime lock alone (`make .venv/.installed-stamp`, what `make dashboard`
# installs: requirements.lock, no dev lock, no wing extras) executes notebooks 01-08 and every dashboard, and
# `python -m workbench_room notebooks/dashboards` answers the latency explorer's page.
# Run from a fresh clone's root: bash scripts/check_runtime_lock.sh [OUT_DIR]   (about 2 min after the install)
set -u
OUT=${1:-/tmp/runtime-lock-check}
PY=.venv/bin/python
mkdir -p "$OUT"
make -s .venv/.installed-stamp > "$OUT/install.log" 2>&1 || { echo "install failed: $OUT/install.log"; exit 1; }
status=0
for nb in notebooks/0[1-8]_*.ipynb notebooks/dashboards/*.ipynb; do
  start=$(date +%s)
  timeout 900 $PY -m jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
    --output-dir "$OUT" "$nb" > "$OUT/$(basename "$nb").log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  echo "$(basename "$nb") rc=$rc $(( $(date +%s) - start )) s"
done
$PY -m workbench_room notebooks/dashboards --host 127.0.0.1 --port 8899 > "$OUT/room.log" 2>&1 &
room=$!
code=000
for _ in $(seq 60); do
  sleep 1
  code=$(curl -s -o /dev/null -w "%{http_code}" http://127.0.0.1:8899/voila/render/latency_explorer.ipynb)
  [ "$code" = 200 ] && break
done
kill $room
echo "latency explorer page: HTTP $code"
[ "$code" = 200 ] || status=1
exit $status
