"""The causes traceq names, declared once: what each means, the evidence it rests on, and the next step.

Idle causes split the GPU's idle time (``queries/idle_causes.sql`` computes them with the same ids);
busy causes split its busy time. Each has a next step per framework, written for that cause alone, so a
report never gives two findings the same advice. ``python -m traceq.analysis.causes`` prints the
README's "Causes" table from this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Framework = Literal["pytorch", "paddle"]


@dataclass(frozen=True)
class Cause:
    """One cause of step time: its id (a finding's id), what it means and what to do about it."""

    id: str
    label: str
    side: Literal["idle", "busy", "both"]
    meaning: str
    evidence: str
    next_steps: dict[str, str] = field(default_factory=dict)

    def next_step(self, framework: str | None) -> str:
        """The next step for ``framework`` (``kineto`` and ``nsys`` runs are PyTorch's), else the general one."""
        key = {"kineto": "pytorch", "nsys": "pytorch", "paddle": "paddle"}.get(framework or "", framework or "")
        return self.next_steps.get(key) or self.next_steps["any"]


_CAUSES = (
    Cause(
        "launch_overhead",
        "launch overhead",
        "idle",
        "The GPU finished its queue while the CPU was still inside framework ops launching the next kernels: "
        "kernels are short and every one costs the CPU more than it costs the GPU.",
        "host-launch gaps while the launching thread is inside ops; kernels per step, median kernel vs launch "
        "time, the top-level ops the GPU waited on",
        {
            "pytorch": "Give each launch more work or launch less: capture the step in a CUDA graph "
            "(torch.compile(mode='reduce-overhead') or torch.cuda.graphs), fuse small ops with torch.compile, "
            "use fused optimizers (Adam(fused=True)), or raise the batch size.",
            "paddle": "Give each launch more work or launch less: paddle.jit.to_static with CINN to fuse ops, "
            "CUDA graphs (paddle.device.cuda.graphs.CUDAGraph), fused optimizers (multi_precision fused adam), "
            "or a larger batch.",
            "any": "Give each launch more work or launch less: CUDA graphs, op fusion, fused optimizers, or a "
            "larger batch.",
        },
    ),
    Cause(
        "host_sync",
        "host synchronisation",
        "idle",
        "A host-device synchronisation (stream/device/event sync, a blocking device-to-host copy, .item(), "
        "bool(tensor), .cpu()) made the CPU wait until the GPU's queue was empty; the GPU then idles until "
        "the CPU has launched new work, and a GPU-bound run idles until its queue is rebuilt.",
        "gaps that began while the launching thread was blocked in a sync call, and the refill after them; "
        "the sync call, the op that made it and the user's call site, calls per step",
        {
            "pytorch": "Remove the host read at the call site named in the evidence: .item(), bool(tensor), "
            "float(tensor), .cpu(), .numpy() and printing a tensor all wait for the GPU. Keep checks on the "
            "device (accumulate torch.isfinite(...) into a tensor) and read them every N steps; copy to pinned "
            "memory with non_blocking=True.",
            "paddle": "Remove the host read at the call site named in the evidence: .numpy(), float(tensor), "
            "tensor.item() and paddle.device.cuda.synchronize() wait for the GPU. Keep checks on the device and "
            "read them every N steps.",
            "any": "Remove the host reads of device values inside the step, or do them every N steps.",
        },
    ),
    Cause(
        "input_pipeline",
        "input pipeline",
        "idle",
        "The GPU waited for the next batch: the CPU was loading or augmenting data, or copying it from pageable "
        "memory.",
        "idle time while the thread is in data-loading ranges (DataLoader, Dataset.__getitem__, collate) or "
        "pageable host-to-device copies",
        {
            "pytorch": "Load batches in background workers: DataLoader(num_workers=N, pin_memory=True, "
            "persistent_workers=True, prefetch_factor=2+) and .to(device, non_blocking=True); move heavy "
            "augmentation to the GPU or precompute it.",
            "paddle": "Load batches in background workers: paddle.io.DataLoader(num_workers=N, "
            "use_shared_memory=True, use_buffer_reader=True); move heavy augmentation to the GPU or precompute "
            "it.",
            "any": "Load and augment batches in background workers and copy them from pinned memory.",
        },
    ),
    Cause(
        "algorithm_search",
        "algorithm search",
        "both",
        "cuDNN/cuBLAS tried candidate algorithms (autotuning, exhaustive search) on the first call with a new "
        "input shape: the call runs many candidate kernels with syncs between them. Shapes that change every "
        "step pay it every step; FP16 has more candidates than FP32.",
        "calls of one op that take 20x its typical call and launch many more kernels with syncs inside, "
        "the new input shapes, calls per step",
        {
            "pytorch": "Input shapes change from step to step while torch.backends.cudnn.benchmark is on: set "
            "it to False, or pad/bucket sequence lengths to a few sizes so each shape is tuned once.",
            "paddle": "Input shapes change from step to step while cuDNN searches algorithms: set "
            "FLAGS_cudnn_exhaustive_search=0 (or tune only in a step range with "
            "paddle.incubate.autotune.set_config), bound FLAGS_conv_workspace_size_limit, and bucket "
            "sequence lengths.",
            "any": "Stop searching algorithms for every new input shape: disable autotuning for dynamic shapes "
            "or bucket the shapes.",
        },
    ),
    Cause(
        "allocator",
        "allocator",
        "idle",
        "Device memory was allocated or released inside the step (cudaMalloc, cudaFree, which also "
        "synchronises): the caching allocator missed, or its cache was emptied.",
        "idle time while the thread is in cudaMalloc/cudaFree (and the ops that made them), calls per step, "
        "calls outside any op (empty_cache)",
        {
            "pytorch": "Keep the caching allocator warm: no torch.cuda.empty_cache() in the loop, stable shapes, "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation.",
            "paddle": "Keep the allocator warm: FLAGS_allocator_strategy=auto_growth, no "
            "paddle.device.cuda.empty_cache() in the loop, stable shapes.",
            "any": "Keep device allocations out of the step: reuse buffers, no cache flushes in the loop.",
        },
    ),
    Cause(
        "cast_overhead",
        "AMP casts",
        "both",
        "Mixed precision converts tensors between FP32 and FP16/BF16: autocast re-casts every weight on every "
        "call and ops on its FP32 list cast back, costing CPU time per cast and cast kernels on the GPU.",
        "idle time inside cast ops (charged to the innermost cast op) and cast-kernel time; conversions per "
        "step, the ops they sit in, FP32->FP16->FP32 round trips",
        {
            "pytorch": "Cast once instead of per call: keep weights in half precision (model.half() or bf16 "
            "with FP32 master weights in the optimizer), run whole blocks in one autocast region, and avoid ops "
            "that force FP32 between half-precision ops.",
            "paddle": "Cast once instead of per call: O2 (paddle.amp.decorate(models, optimizers, level='O2')) "
            "keeps parameters in FP16; trim custom_black_list ops that force FP32 round trips.",
            "any": "Keep parameters in half precision so they are not re-cast every call.",
        },
    ),
    Cause(
        "python_overhead",
        "Python between ops",
        "idle",
        "The GPU waited while the launching thread ran Python between framework ops (outside any op).",
        "idle time while the thread is between the framework ops of its step; the Python frames, where recorded",
        {
            "pytorch": "Remove per-op Python from the step: torch.compile the model, avoid Python loops over "
            "tensors or parameters inside the step, and move bookkeeping out of the hot loop.",
            "paddle": "Remove per-op Python from the step: paddle.jit.to_static, no Python loops over tensors "
            "inside the step.",
            "any": "Remove per-op Python from the step (compile the model, no Python loops over tensors).",
        },
    ),
    Cause(
        "host_unattributed",
        "host time not attributed",
        "idle",
        "The GPU waited while its launching thread was in no call the trace records: before the step's first "
        "framework op or after its last, or on a thread without framework ops. Nothing in the trace says what "
        "the host did then (a data-loading range, a pageable copy or a framework op around it would name a "
        "cause), so no cause is named.",
        "idle time while the thread is outside every recorded call and outside the span of its step's "
        "framework ops",
        {
            "pytorch": "Record what the host does there before acting on it: wrap the loop's parts in "
            "torch.profiler.record_function or NVTX ranges (torch.cuda.nvtx.range), or profile with Python "
            "stacks (with_stack=True), and report again.",
            "paddle": "Record what the host does there before acting on it: wrap the loop's parts in "
            "paddle.profiler.RecordEvent ranges, and report again.",
            "any": "Record what the host does there (NVTX or profiler ranges around the loop's parts), and "
            "report again.",
        },
    ),
    Cause(
        "gpu_compute",
        "GPU compute",
        "busy",
        "Time the GPU spends computing (kernels other than casts, layout transforms, optimizer updates and "
        "copies). AMP shortens it where GEMMs, convolutions and attention run in FP16/BF16 on tensor cores.",
        "GPU busy time (the union of its kernels), FP16/BF16 and tensor-core coverage, ops still in FP32",
        {
            "any": "Check which ops still run in FP32 or off tensor cores (the per-op table), and that GEMM and "
            "conv dimensions are multiples of 8.",
        },
    ),
    Cause(
        "fp32_compute",
        "FP32 compute",
        "busy",
        "Most GEMM/conv/attention time runs in FP32: AMP is off for those ops or they are on its FP32 list.",
        "the share of compute-kernel time in FP16/BF16/FP8, the ops with the most FP32 compute time",
        {
            "pytorch": "Run those ops under torch.autocast (check they are not on its FP32 list), or train in bf16.",
            "paddle": "Run those ops under paddle.amp.auto_cast (check custom_black_list), or use O2.",
            "any": "Run those ops in half precision, or this run is FP32 by design.",
        },
    ),
    Cause(
        "no_tensor_cores",
        "half precision off tensor cores",
        "busy",
        "Half-precision GEMMs/convolutions run in kernels that do not use tensor cores.",
        "the share of half-precision compute time in tensor-core kernels (by kernel name)",
        {
            "pytorch": "Pad GEMM and conv dimensions (channels, hidden sizes, sequence lengths) to multiples of "
            "8 and use channels_last for convolutions.",
            "paddle": "Pad GEMM and conv dimensions to multiples of 8 and use data_format='NHWC' for convolutions.",
            "any": "Pad dimensions to multiples of 8.",
        },
    ),
    Cause(
        "layout_transforms",
        "layout transforms",
        "busy",
        "Kernels that only reorder memory (nchwToNhwc, transposes) around half-precision convolutions: cuDNN's "
        "tensor-core convolutions want NHWC.",
        "layout-class kernel time per step",
        {
            "pytorch": "Use channels_last end to end: model.to(memory_format=torch.channels_last) and the same "
            "for inputs.",
            "paddle": "Use data_format='NHWC' in the conv layers and their inputs.",
            "any": "Keep tensors in the layout the convolutions want (NHWC) end to end.",
        },
    ),
    Cause(
        "optimizer",
        "optimizer",
        "busy",
        "GPU time of the optimizer update and AMP's loss-scaler kernels (unscale, inf checks).",
        "optimizer-class kernel time per step",
        {
            "pytorch": "Use a fused or multi-tensor optimizer (Adam(fused=True) or foreach=True).",
            "paddle": "Use a fused optimizer (multi_tensor / use_multi_tensor=True, fused adam).",
            "any": "Use a fused or multi-tensor optimizer.",
        },
    ),
    Cause(
        "memory_copies",
        "memory copies",
        "busy",
        "GPU time in memcpy and memset.",
        "memcpy/memset time per step",
        {"any": "Keep tensors on the device between steps; copy inputs asynchronously from pinned memory."},
    ),
    Cause(
        "communication",
        "communication",
        "busy",
        "Collective communication no other GPU work hides; across ranks mostly waiting for the slowest rank.",
        "communication kernel time not overlapped by compute, per rank",
        {
            "any": "Overlap communication with compute (gradient bucket size, gradient accumulation) and look "
            "at the straggler.",
        },
    ),
    Cause(
        "straggler",
        "straggler rank",
        "both",
        "One rank is slower than the others in most steps, and the others wait for it in collectives.",
        "per-step slowest rank and how long the others wait",
        {"any": "Explain the straggler's own step (traceq report on its rank): its causes are the job's."},
    ),
    Cause(
        "unexplained",
        "unexplained idle",
        "idle",
        "The GPU had work queued but waited (cross-stream dependencies, events), or the work's launch was not "
        "captured.",
        "dependency gaps and gaps whose next GPU work has no captured launch",
        {"any": "Look at the streams and events the waiting work depends on in a timeline (traceq export)."},
    ),
)

#: Every cause by id.
CAUSES: dict[str, Cause] = {c.id: c for c in _CAUSES}
#: Idle causes in the order of ``queries/idle_causes.sql``.
IDLE_CAUSES: tuple[str, ...] = tuple(c.id for c in _CAUSES if c.side in ("idle", "both"))


def markdown_table() -> str:
    """The README's "Causes" table."""
    rows = ["| id | what it means | evidence | next step (PyTorch) |", "|---|---|---|---|"]
    rows += [f"| `{c.id}` | {c.meaning} | {c.evidence} | {c.next_step('pytorch')} |" for c in _CAUSES]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
