#!/usr/bin/env bash
# Runs timed by the clean protocol (scripts/measure_clean.py) and captured under Nsight Systems in the
# styles of STYLES (default "steps ops"), each capture in a fresh process: `steps`, NVTX step ranges only
# (`train_step N`, as users name theirs: the CUDA calls are the host's only other rows); `ops`, PyTorch's
# NVTX op ranges and shapes too (emit_nvtx, as the shared captures were); `plain`, the op ranges without
# shapes (as the planted captures were); `user`, as `ops` with a user's range `backward` around each
# backward pass. Rounds 1-3, then the captures, then rounds 4-6 (the captures
# halfway); each capture cut to three of its eight step ranges (4-6) after the warm-up.
# Usage: NSYS=/path/to/nsys DEBS=folder-of-libdw1-libelf1 CONFORMER_TOOL=gen_gpu_traces.py \
#        scripts/nsys_styles_on_gpu.sh WORK_DIR MACHINE_LABEL [RUN,RUN,...]
set -u
work=${1:?WORK_DIR}; machine=${2:-}; runs=${3:-conformer_fp32_b4,conformer_fp16_b4}
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1
mkdir -p "$work/trimmed"
first=${runs%%,*}
python3 "$here/measure_clean.py" protocol --runs "$runs" --rounds 3 --first-round 1 --out "$work" \
  --machine "$machine" --warm "$first" >> "$work/protocol.log" 2>&1
if [ -n "${DEBS:-}" ]; then
  mkdir -p /tmp/dw && for f in "$DEBS"/*.deb; do dpkg -x "$f" /tmp/dw; done
  export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
for style in ${STYLES:-steps ops}; do
  for run in ${runs//,/ }; do
    flag=""; [ "$style" = ops ] && flag=--ops; [ "$style" = plain ] && flag="--ops --no-shapes"
    [ "$style" = user ] && flag="--ops --user-ranges"
    name="nsys_${style}_${run}"
    echo "capture $name $(date -u +%T)" >> "$work/protocol.log"
    timeout 200 "$NSYS" profile -t cuda,nvtx --sample=none --cpuctxsw=none -o "/tmp/$name" --force-overwrite true \
      python3 "$here/measure_clean.py" capture "$run" --steps 8 $flag >> "$work/captures.jsonl" 2>> "$work/protocol.log"
    timeout 120 "$NSYS" export --type sqlite --force-overwrite true -o "/tmp/$name.sqlite" "/tmp/$name.nsys-rep" \
      >> "$work/protocol.log" 2>&1
    [ -f "/tmp/$name.sqlite" ] && python3 "$here/trim_nsys.py" "/tmp/$name.sqlite" \
      "$work/trimmed/${name}_3steps.sqlite.gz" '^train_step ' 4 3 >> "$work/protocol.log" 2>&1
  done
done
python3 "$here/measure_clean.py" protocol --runs "$runs" --rounds 3 --first-round 4 --out "$work" \
  --machine "$machine" >> "$work/protocol.log" 2>&1
echo "DONE $(date -u +%T)" >> "$work/protocol.log"
