#!/usr/bin/env bash
# Make every planted-cause trace on a CUDA machine (see gen_planted_traces.py) within a time budget, then
# pack them into OUT_DIR as xz-compressed tar parts of at most 15 MB.
# Usage: scripts/planted_on_gpu.sh OUT_DIR [BUDGET_S] [GROUP ...]
# nsys runs need NSYS (the nsys binary) and, where its importer lacks libdw, DEBS (a folder of libdw1 and
# libelf1 .deb files).
set -u
out=${1:?OUT_DIR}; budget=${2:-520}; shift 2 || true
here=$(cd "$(dirname "$0")" && pwd)
work=/tmp/planted; mkdir -p "$work"
start=$(date +%s)
export PYTHONUNBUFFERED=1
left() { echo $(( budget - ($(date +%s) - start) )); }

# Each group runs in a fresh process (cuDNN's algorithm cache and the allocator start empty).
groups=("control_fp32,control_fp16"
        "enc_fp32,enc_fp16,sync_fp16,sync_fp32,half_fp16,alloc_fp16"
        "input_fp16,workers_fp16"
        "cudnn_fixed_fp16" "cudnn_var_fp16" "cudnn_var_fp32" "cudnn_var_nobench_fp16"
        "nsys:enc_fp16" "nsys:sync_fp16"
        "resnet50_b64_fp32,resnet50_b64_fp16,resnet18_b4_fp32,resnet18_b4_fp16"
        "bert_b4_fp32,bert_b4_fp16")
[ $# -gt 0 ] && groups=("$@")

if [ -n "${DEBS:-}" ]; then
  mkdir -p /tmp/dw && for f in "$DEBS"/*.deb; do dpkg -x "$f" /tmp/dw; done
  export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi

for g in "${groups[@]}"; do
  t=$(left)
  if [ "$t" -lt 40 ]; then echo "SKIPPED (time) $g"; continue; fi
  [ "$t" -gt 200 ] && t=200
  echo "== $g ($(left) s left)"
  if [[ $g == nsys* ]]; then  # nsys:RUN traces CUDA and NVTX; nsys+cudnn:RUN adds cuDNN's API
    run=${g#*:}; traces=cuda,nvtx; [[ $g == nsys+* ]] && traces=$traces,${g%%:*} && traces=${traces/nsys+/}
    timeout "$t" "$NSYS" profile -t "$traces" --sample=none --cpuctxsw=none -o "$work/nsys_$run" \
      --force-overwrite true python3 "$here/gen_planted_traces.py" --out "$work/nsys" --only "$run" --nsys \
      --steps 20 --prof-steps 12 2>&1 | tail -5
    timeout 90 "$NSYS" export --type sqlite --force-overwrite true -o "$work/nsys_$run.sqlite" \
      "$work/nsys_$run.nsys-rep" 2>&1 | tail -2
    [ -f "$work/nsys_$run.sqlite" ] && gzip -6 "$work/nsys_$run.sqlite"
    rm -f "$work/nsys_$run.nsys-rep" "$work/nsys_$run.qdstrm"
  else
    timeout "$t" python3 "$here/gen_planted_traces.py" --out "$work" --only "$g" --raw --steps ${STEPS:-30} 2>&1 | grep -v Warning | tail -12
  fi
done
cat "$work"/nsys/runs.jsonl >> "$work/runs.jsonl" 2>/dev/null
rm -rf "$work/nsys"
ls -la "$work"
echo "packing ($(left) s left)"
tar -C "$work" -cf - . | xz -6 -T0 | split -b 15M - "$out/planted.tar.xz.part-"
cp "$work/runs.jsonl" "$out/" 2>/dev/null
ls -la "$out"
