#!/usr/bin/env bash
# The clean protocol on a CUDA machine (scripts/measure_clean.py): every run timed in fresh processes that
# never profile, 3 rounds alternating, each run profiled in a fresh process halfway through them, then Nsight Systems
# captures; traces cut to three steps and packed as xz tar parts of at most 15 MB.
# Usage: scripts/clean_on_gpu.sh WORK_DIR BUDGET_S MACHINE_LABEL   (nsys needs NSYS and DEBS as in planted_on_gpu.sh;
# RUNS, PROFILE and WARM, comma-separated, choose the runs timed, those profiled and those timed once first)
set -u
work=${1:?WORK_DIR}; budget=${2:-1200}; machine=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
mkdir -p "$work/trimmed"
default_runs=enc_fp32,enc_fp16,half_fp16,alloc_fp16,sync_fp16,control_fp32,control_fp16,resnet18_b4_fp32,resnet18_b4_fp16
default_runs=$default_runs,resnet50_b64_fp32,resnet50_b64_fp16,bert_b4_fp32,bert_b4_fp16,workers8_fp16,input8_fp16
default_runs=$default_runs,base128_fp32,sync128_fp32,alloc128_fp32,cudnn_var_nobench_fp16,cudnn_var_fp16,enc_b128_fp16,sync_b128_fp16
runs=${RUNS:-$default_runs}; profile=${PROFILE:-$runs}; warm=${WARM:-}
nsys_runs=${NSYS_RUNS-enc_b128_fp16 sync_b128_fp16 cudnn_var_fp16}
reserve=40; [ -n "${NSYS:-}" ] && [ -n "$nsys_runs" ] && reserve=200  # the captures' time, kept back
python3 "$here/measure_clean.py" protocol --runs "$runs" --rounds 3 --out "$work" --machine "$machine" \
  --budget $(( budget - reserve )) --profile "$profile" --warm "$warm" > "$work/protocol.log" 2>&1
if [ -n "${DEBS:-}" ]; then
  mkdir -p /tmp/dw && for f in "$DEBS"/*.deb; do dpkg -x "$f" /tmp/dw; done
  export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
for run in $nsys_runs; do
  [ -n "${NSYS:-}" ] || break
  t=$(left); [ "$t" -lt 90 ] && { echo "nsys $run skipped (time)" >> "$work/protocol.log"; continue; }
  timeout 150 "$NSYS" profile -t cuda,nvtx --sample=none --cpuctxsw=none -o "/tmp/nsys_$run" --force-overwrite true \
    python3 "$here/gen_planted_traces.py" --out "$work/nsys" --only "$run" --nsys --steps 20 --prof-steps 12 \
    >> "$work/protocol.log" 2>&1
  timeout 90 "$NSYS" export --type sqlite --force-overwrite true -o "/tmp/nsys_$run.sqlite" "/tmp/nsys_$run.nsys-rep" \
    >> "$work/protocol.log" 2>&1
  [ -f "/tmp/nsys_$run.sqlite" ] && python3 "$here/trim_nsys.py" "/tmp/nsys_$run.sqlite" \
    "$work/trimmed/nsys_${run}_4steps.sqlite.gz" '^train_step \d+$' 4 4 >> "$work/protocol.log" 2>&1
done
python3 "$here/trim_planted.py" "$work/traces" "$work/trimmed" >> "$work/protocol.log" 2>&1
echo "DONE $(left) s left" >> "$work/protocol.log"
