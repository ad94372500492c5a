#!/usr/bin/env bash
# One GPU lease for the fidelity study (pipelines/fidelity_gpu.toml), run from the repository root:
#     bash pipelines/fidelity_gpu.sh              on the device machine ($OUT set by the device tool)
#     DRY_RUN=1 bash pipelines/fidelity_gpu.sh    anywhere: checks the inputs and the plan, trains nothing
# It needs gpu-data/ids (`make gpu-data`) and gpu-data/eval (`make gpu-data-eval`), carried to the device (the
# device tool's `carry = ["gpu-data"]`; at most 40 MiB). It builds xlp's C++ extensions for the device's Python
# when they are missing (the .so files built here do not travel), runs the recipe with three stages at a time on
# the one GPU, and copies the claims report (report.md, results.json, the valid-loss plot), the run log and the
# device description to $OUT (default out/fidelity_gpu_report). Budget: docs/results/README.md.
set -euo pipefail
PY=${PYTHON:-python3}
OUT=${OUT:-out/fidelity_gpu_report}
for need in gpu-data/ids gpu-data/eval; do
    [ -d "$need" ] || { echo "fidelity_gpu.sh: no $need (make gpu-data gpu-data-eval)" >&2; exit 2; }
done
export XLP_DATA_DIR="$PWD/gpu-data/eval" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ -n "${DRY_RUN:-}" ]; then
    exec "$PY" -m xlp_cli.cli run pipelines/fidelity_gpu.toml --dry-run
fi
mkdir -p "$OUT"
start=$(date +%s)
"$PY" -c "import xlp_cli.text._native, xlp_cli.bpe._applybpe" 2>/dev/null || "$PY" setup.py -q build_ext --inplace
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true; "$PY" -V; } > "$OUT/device.txt"
set +e
"$PY" -m xlp_cli.cli run pipelines/fidelity_gpu.toml --jobs 3 > "$OUT/run.log" 2>&1
rc=$?
set -e
claims=out/fidelity_gpu/evaluate/claims
for f in report.md results.json claims_valid_loss.png; do
    [ -f "$claims/$f" ] && cp "$claims/$f" "$OUT/"
done
echo "fidelity_gpu.sh: exit $rc, wall $(( $(date +%s) - start )) s" | tee -a "$OUT/run.log"
exit $rc
