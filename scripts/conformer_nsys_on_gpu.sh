#!/usr/bin/env bash
# The Conformer b4 pair of the shared Kineto traces, timed by the clean protocol (scripts/measure_clean.py)
# and captured under Nsight Systems as the shared nsys captures were: PyTorch's NVTX op ranges with their
# shapes (gen_gpu_traces.py --nvtx), no step ranges of its own, so its steps are the stretches between
# optimizer steps. Rounds 1-3, then both captures, then rounds 4-6 (the captures halfway); each capture cut
# to four optimizer steps (three steps between them) after the warm-up.
# Usage: NSYS=/path/to/nsys DEBS=folder-of-libdw1-libelf1 CONFORMER_TOOL=gen_gpu_traces.py \
#        scripts/conformer_nsys_on_gpu.sh WORK_DIR MACHINE_LABEL
set -u
work=${1:?WORK_DIR}; machine=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1
runs=conformer_fp32_b4,conformer_fp16_b4
mkdir -p "$work/trimmed"
python3 "$here/measure_clean.py" protocol --runs "$runs" --rounds 3 --first-round 1 --out "$work" \
  --machine "$machine" --warm conformer_fp32_b4 >> "$work/protocol.log" 2>&1
if [ -n "${DEBS:-}" ]; then
  mkdir -p /tmp/dw && for f in "$DEBS"/*.deb; do dpkg -x "$f" /tmp/dw; done
  export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
for mode in fp32 fp16; do
  echo "nsys conformer_${mode}_b4 $(date -u +%T)" >> "$work/protocol.log"
  timeout 200 "$NSYS" profile -t cuda,nvtx --sample=none --cpuctxsw=none -o "/tmp/conformer_$mode" \
    --force-overwrite true python3 "$CONFORMER_TOOL" --out /tmp/conformer_out --batches 4 --modes "$mode" \
    --prof-steps 0 --nvtx --steps 8 >> "$work/protocol.log" 2>&1
  timeout 120 "$NSYS" export --type sqlite --force-overwrite true -o "/tmp/conformer_$mode.sqlite" \
    "/tmp/conformer_$mode.nsys-rep" >> "$work/protocol.log" 2>&1
  [ -f "/tmp/conformer_$mode.sqlite" ] && python3 "$here/trim_nsys.py" "/tmp/conformer_$mode.sqlite" \
    "$work/trimmed/nsys_conformer_${mode}_b4_3steps.sqlite.gz" '^Optimizer\.step#' 6 4 >> "$work/protocol.log" 2>&1
done
python3 "$here/measure_clean.py" protocol --runs "$runs" --rounds 3 --first-round 4 --out "$work" \
  --machine "$machine" >> "$work/protocol.log" 2>&1
echo "DONE $(date -u +%T)" >> "$work/protocol.log"
