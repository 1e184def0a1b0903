"""The causes traceq names, declared once: what each means, the evidence it rests on, and the next step.

Idle causes split the GPU's idle time (``queries/idle_causes.sql`` computes them with the same ids);
busy causes split its busy time. Each has a next step per framework, written for that cause alone, so a
report never gives two findings the same advice. Everything else that names a cause reads it here: a
run's finding titles and a comparison's (:mod:`traceq.analysis.report`, :mod:`traceq.analysis.compare`),
the split (:mod:`traceq.analysis.split`), the evidence (:mod:`traceq.analysis.evidence`), the what-if
fixes (:mod:`traceq.analysis.replay.whatif`) and the HTML page's colours (:mod:`traceq.render.html`) refer
to the constants below, never to an id written out (``tests/test_structure.py`` checks it). A new cause is
an entry here, its SQL in ``queries/`` and its test. ``python -m traceq.analysis.causes`` prints the
README's "Causes" table from this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from traceq.schema import KINETO, NSYS, PADDLE


@dataclass(frozen=True)
class Count:
    """A count in a cause's evidence that shows its mechanism (calls, kernels, ms per step): a comparison's
    title gives it for both runs, and a run's title may say it in words."""

    #: the evidence key: a number, or a mapping of numbers (calls by name) that is summed
    key: str
    #: what a comparison's title calls it, after the two numbers
    words: str
    #: the numbers' format in a comparison's title
    fmt: str = ",.0f"
    #: what a run's title counts, singular and plural (None: an ``s`` added), where it says the count in words
    noun: tuple[str, str | None] | None = None

    def of(self, evidence: dict[str, Any]) -> float:
        """The count in one run's ``evidence`` of the cause (0 where it is missing)."""
        value = evidence.get(self.key) or 0.0
        return float(sum(value.values())) if isinstance(value, dict) else float(value)


@dataclass(frozen=True)
class Cause:
    """One cause of step time: its id (a finding's id), what it means and what to do about it, and how the
    reports name it."""

    id: str
    label: str
    side: Literal["idle", "busy", "both"]
    meaning: str
    evidence: str
    next_steps: dict[str, str] = field(default_factory=dict)
    #: a run's finding title: ``{ms}`` (its size), ``{share}`` (of the step), ``{n}`` (its :attr:`count`),
    #: ``{calls}`` (that count in words) and ``{Label}`` (its label, capitalised)
    title: str = "{Label} take {ms} ms of GPU time per step ({share})"
    #: how a comparison's finding names this part's change (None: not a part of the step)
    change: str | None = None
    #: the evidence count that shows the mechanism before and after
    count: Count | None = None
    #: what the replay's what-if scenario for this cause stands for (the fix it models; None: none)
    what_if: str | None = None
    #: the colour of its idle time on the HTML page's timeline (None: not drawn)
    colour: str | None = None
    #: whether a run's report names it as a finding when it is large (False: the step's work itself, or
    #: what no fix acts on: shown in the split only)
    run_finding: bool = True
    #: the kernel class (``kernel_classes.kernel_class``) whose time is this busy part
    kernel_class: str | None = None

    def next_step(self, framework: str | None) -> str:
        """The next step for ``framework`` (``kineto`` and ``nsys`` runs are PyTorch's), else the general one."""
        key = {KINETO: "pytorch", NSYS: "pytorch", PADDLE: "paddle"}.get(framework or "", framework or "")
        return self.next_steps.get(key) or self.next_steps["any"]


LAUNCH_OVERHEAD = Cause(
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
    title="The GPU idles {ms} ms per step ({share}) while the CPU launches work",
    change="GPU idle while the CPU launches work",
    count=Count("kernels_per_step", "kernels per step"),
    what_if="CUDA graphs: host launch cost ~0",
    colour="#d62728",
)

HOST_SYNC = Cause(
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
    title="{calls} per step drain the GPU queue: {ms} ms per step of GPU idle ({share})",
    change="GPU idle after host synchronisations",
    count=Count("sync_calls_per_step", "sync calls per step", noun=("host synchronisation", None)),
    what_if="checks removed (the syncs, their reads and the predicates read)",
    colour="#40004b",
)

INPUT_PIPELINE = Cause(
    "input_pipeline",
    "input pipeline",
    "idle",
    "The GPU waited for the next batch: the CPU was loading or augmenting data, or copying it from pageable memory.",
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
    title="The GPU waits {ms} ms per step ({share}) for input data",
    change="GPU idle waiting for input data",
    count=Count("data_loading_ms_per_step", "ms per step in data loading", ",.2f"),
    what_if="input pipeline overlapped (workers, pinned memory)",
    colour="#01665e",
)

ALGORITHM_SEARCH = Cause(
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
    title="cuDNN/cuBLAS searched for algorithms on new input shapes ({n:.1f} calls per step): {ms} ms per step "
    "({share})",
    change="Algorithm search (cuDNN/cuBLAS autotuning)",
    count=Count("searching_calls_per_step", "searching calls per step", ",.1f"),
    what_if="autotuning done once",
    colour="#525252",
)

ALLOCATOR = Cause(
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
    title="{calls} per step cost {ms} ms per step of GPU idle ({share})",
    change="GPU idle in device allocations and frees",
    count=Count(
        "allocator_calls_per_step",
        "allocations and frees per step",
        noun=("device allocation or free", "device allocations and frees"),
    ),
    what_if="no device allocation in the step",
    colour="#f781bf",
)

CAST_OVERHEAD = Cause(
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
    title="{calls} per step cost {ms} ms per step ({share}) in cast ops and cast kernels",
    change="AMP cast cost (GPU idle in cast ops and cast kernels)",
    count=Count("conversions_per_step", "conversions per step", noun=("dtype cast", None)),
    what_if="casts and loss scaler removed (O2-style half weights)",
    colour="#ff7f0e",
    kernel_class="cast",
)

PYTHON_OVERHEAD = Cause(
    "python_overhead",
    "Python between ops",
    "idle",
    "The GPU waited while the launching thread ran Python between framework ops (outside any op).",
    "idle time while the thread is between the framework ops of its step; the Python frames, where recorded, "
    "and the top-level ranges it lies in (Optimizer.step#Adam.step)",
    {
        "pytorch": "Remove per-op Python from the step: torch.compile the model, avoid Python loops over "
        "tensors or parameters inside the step, and move bookkeeping out of the hot loop.",
        "paddle": "Remove per-op Python from the step: paddle.jit.to_static, no Python loops over tensors "
        "inside the step.",
        "any": "Remove per-op Python from the step (compile the model, no Python loops over tensors).",
    },
    title="Python between ops keeps the GPU idle {ms} ms per step ({share})",
    change="GPU idle while Python runs between ops",
    what_if="CUDA graphs: host time between ops ~0",
    colour="#17becf",
)

HOST_UNATTRIBUTED = Cause(
    "host_unattributed",
    "host time not attributed",
    "idle",
    "The GPU waited while its launching thread was in no op or runtime call the trace records: before the "
    "step's first framework op or after its last, or on a thread without framework ops. Nothing in the "
    "trace says what the host did then (a data-loading range, a pageable copy or a framework op around it "
    "would name a cause), so no cause is named; a range of the user's or of a library around it (record_function, an "
    "NVTX range) says where it was spent, not on what.",
    "idle time while the thread is outside every recorded op and runtime call and outside the span of its "
    "step's framework ops; the top-level ranges it lies in",
    {
        "pytorch": "Record what the host does there before acting on it: wrap the loop's parts (or, where "
        "the time lies in a range already, that range's parts) in torch.profiler.record_function or NVTX "
        "ranges (torch.cuda.nvtx.range), or profile with Python stacks (with_stack=True), and report again.",
        "paddle": "Record what the host does there before acting on it: wrap the loop's parts (or, where the "
        "time lies in a range already, that range's parts) in paddle.profiler.RecordEvent ranges, and "
        "report again.",
        "any": "Record what the host does there (NVTX or profiler ranges around the loop's parts, or around "
        "the parts of a range the time lies in already), and report again.",
    },
    title="The GPU idles {ms} ms per step ({share}) while the host is outside every op and runtime call: host "
    "time not attributed to a cause",
    change="GPU idle while the host is outside every op and runtime call (not attributed to a cause)",
    colour="#2b59ff",
)

GPU_COMPUTE = Cause(
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
    change="GPU compute time",
    run_finding=False,
)

#: Named from the compute kernels' precision (``report.py``'s coverage rules), not a part of the split.
FP32_COMPUTE = Cause(
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
)

#: Named from the compute kernels' tensor-core use (``report.py``'s coverage rules), not a part of the split.
NO_TENSOR_CORES = Cause(
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
)

LAYOUT_TRANSFORMS = Cause(
    "layout_transforms",
    "layout transforms",
    "busy",
    "Kernels that only reorder memory (nchwToNhwc, transposes) around half-precision convolutions: cuDNN's "
    "tensor-core convolutions want NHWC.",
    "layout-class kernel time per step",
    {
        "pytorch": "Use channels_last end to end: model.to(memory_format=torch.channels_last) and the same for inputs.",
        "paddle": "Use data_format='NHWC' in the conv layers and their inputs.",
        "any": "Keep tensors in the layout the convolutions want (NHWC) end to end.",
    },
    change="Layout-transform kernel time",
    what_if="layout transforms removed",
    kernel_class="layout",
)

OPTIMIZER = Cause(
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
    change="Optimizer and loss-scaler kernel time",
    run_finding=False,
    kernel_class="optimizer",
)

MEMORY_COPIES = Cause(
    "memory_copies",
    "memory copies",
    "busy",
    "GPU time in memcpy and memset.",
    "memcpy/memset time per step",
    {"any": "Keep tensors on the device between steps; copy inputs asynchronously from pinned memory."},
    change="Memory copy and set time",
    run_finding=False,
)

COMMUNICATION = Cause(
    "communication",
    "communication",
    "busy",
    "Collective communication no other GPU work hides; across ranks mostly waiting for the slowest rank.",
    "communication kernel time not overlapped by compute, per rank",
    {
        "any": "Overlap communication with compute (gradient bucket size, gradient accumulation) and look "
        "at the straggler.",
    },
    change="Collective time not hidden by compute",
    run_finding=False,
)

#: Named from the ranks' step windows (:func:`traceq.analysis.ranks.straggler_finding`). Its side puts it among
#: the idle causes, so every split carries it (0 ms: ``idle_causes.sql`` charges no idle time to it).
STRAGGLER = Cause(
    "straggler",
    "straggler rank",
    "both",
    "One rank is slower than the others in most steps, and the others wait for it in collectives.",
    "per-step slowest rank and how long the others wait",
    {"any": "Explain the straggler's own step (traceq report on its rank): its causes are the job's."},
)

UNEXPLAINED = Cause(
    "unexplained",
    "unexplained idle",
    "idle",
    "The GPU had work queued but waited (cross-stream dependencies, events), or the work's launch was not captured.",
    "dependency gaps and gaps whose next GPU work has no captured launch",
    {"any": "Look at the streams and events the waiting work depends on in a timeline (traceq export)."},
    change="GPU idle with work queued (unexplained)",
    colour="#c8c8c8",
    run_finding=False,
)

#: Every cause, in the README's order.
_CAUSES = (
    LAUNCH_OVERHEAD,
    HOST_SYNC,
    INPUT_PIPELINE,
    ALGORITHM_SEARCH,
    ALLOCATOR,
    CAST_OVERHEAD,
    PYTHON_OVERHEAD,
    HOST_UNATTRIBUTED,
    GPU_COMPUTE,
    FP32_COMPUTE,
    NO_TENSOR_CORES,
    LAYOUT_TRANSFORMS,
    OPTIMIZER,
    MEMORY_COPIES,
    COMMUNICATION,
    STRAGGLER,
    UNEXPLAINED,
)

#: Every cause by id.
CAUSES: dict[str, Cause] = {c.id: c for c in _CAUSES}
#: The idle side of the split, in the order of ``queries/idle_causes.sql`` (with ``straggler``: see its entry).
IDLE_CAUSES: tuple[str, ...] = tuple(c.id for c in _CAUSES if c.side in ("idle", "both"))
#: The busy side of the split, in waterfall order (``gpu_compute`` is what is left of busy time after the others).
_BUSY = (GPU_COMPUTE, CAST_OVERHEAD, LAYOUT_TRANSFORMS, OPTIMIZER, MEMORY_COPIES, COMMUNICATION, ALGORITHM_SEARCH)
BUSY_PARTS: tuple[str, ...] = tuple(c.id for c in _BUSY)
#: The busy parts that are a kernel class's time: kernel class -> cause id.
CLASS_PARTS: dict[str, str] = {c.kernel_class: c.id for c in _BUSY if c.kernel_class}
#: The causes a run's report shows in its split only, never as a finding (the step's work itself, or what
#: no fix acts on).
NOT_FINDINGS: tuple[str, ...] = tuple(c.id for c in _CAUSES if not c.run_finding)
#: The colours of idle time by cause on the HTML page's timeline, in the order of :data:`IDLE_CAUSES`.
COLOURS: dict[str, str] = {c.id: c.colour for c in _CAUSES if c.colour}


def markdown_table() -> str:
    """The README's "Causes" table."""
    rows = ["| id | what it means | evidence | next step (PyTorch) |", "|---|---|---|---|"]
    rows += [f"| `{c.id}` | {c.meaning} | {c.evidence} | {c.next_step('pytorch')} |" for c in _CAUSES]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
