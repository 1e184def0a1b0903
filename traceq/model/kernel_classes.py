"""Kernel classification by name: precision, tensor-core use and what the kernel does. One rule table.

The rules are data: ordered ``(pattern, value)`` lists per attribute, first match wins (so an exception
is a rule placed before the general one: the regex engine has no look-around). Precision: a kernel that
names both float and double (fused optimizers take double hyper-parameters) is taken as fp32. Tensor-core rules
put the negative markers first (``sgemm``, ``ffma``, ``simt``, ``gemv``, ``xmma_pooling``, FP32 cuDNN
``scudnn``): a flat substring list would mark FP32 ``xmma_gemm_..._ffma`` GEMMs as tensor-core work. The
positive markers cover Volta to Hopper/Blackwell: MMA shapes (``884``, ``1688``, ``16816``, ``16832``),
xmma ``_tensor16x8x16`` suffixes, CUTLASS ``tensorop``, ``wgmma``/``hmma``/``imma``/``mma_sync``, cuBLAS
``nvjet_*`` and flash attention. Names are matched as the profilers print them (demangled, or cut with
``...`` in Paddle summaries); the same table serves traces and summary text.
"""

from __future__ import annotations

import polars as pl

from traceq.schema import KERNEL_CLASS_TABLE, RunTables

PRECISIONS = ("fp8", "int8", "bf16", "tf32", "fp16", "fp64", "fp32", "unknown")
KERNEL_CLASSES = (
    "memcpy", "memset", "comm", "layout", "cast", "optimizer", "attention", "conv", "gemm", "reduction",
    "elementwise", "other",
)  # fmt: skip

PRECISION_RULES: tuple[tuple[str, str], ...] = (
    (r"(?i)e4m3|e5m2|fp8|float8", "fp8"),
    (r"(?i)int8|imma|i8816|i16832|s8s8", "int8"),
    (r"(?i)bf16|bfloat16|nvjet(?:_sm\d+)?_t[a-z]{2}_", "bf16"),
    (r"(?i)tensorop_s1688gemm.*f16", "fp16"),
    (r"(?i)tf32|tensorop_s1688gemm", "tf32"),
    (r"(?i)fp16|f16|half|hgemm|h884|h1688|h16816|hmma|float16|nvjet(?:_sm\d+)?_h[a-z]{2}_|^Cijk_.*_H[BHS]_", "fp16"),
    (r"(?i)(?:^|[^a-z0-9])float(?:[^a-z0-9]|$)|sgemm|scudnn|f32|fp32|gcgemm|ffma", "fp32"),
    (r"nvjet(?:_sm\d+)?_s[a-z]{2}_|^Cijk_.*_SB_", "fp32"),
    (r"(?i)double|fp64|dgemm|d884|dmma|f64", "fp64"),
)
TENSOR_CORE_RULES: tuple[tuple[str, bool], ...] = (
    (r"(?i)ffma|_simt_|sgemm|hfma2|gemv|xmma_pooling|scudnn|gcgemm|implicit_convolve|fmha_cutlass[fb]_f32", False),
    (
        r"(?i)[hsidc]884|[hsidc]1688|16816|16832|8816|_tensor\d+x\d+x\d+|tensorop|wgmma|gmma|warpgroupsize|hmma"
        r"|imma|dmma|mma_sync|wmma|nvjet_|flash_fwd|flash_bwd|flash::|flash_fprop|flash_bprop|fmha|xmma_gemm"
        r"|sm\d+_xmma_\w*(?:f16|bf16|tf32|i8)|^Cijk_.*_MI\d+x\d+x\d+",
        True,
    ),
)
CLASS_RULES: tuple[tuple[str, str], ...] = (
    (r"(?i)^(?:\[CUDA )?memcpy", "memcpy"),
    (r"(?i)^(?:\[CUDA )?memset", "memset"),
    (r"(?i)nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv", "comm"),
    (r"ImplicitGemmConvolution", "conv"),
    (r"(?i)nchwto|nhwcto|tonhwc|tonchw|nchw2nhwc|nhwc2nchw|transpose|permute|swapdim|tensortransform", "layout"),
    (r"(?i)broadcast", "elementwise"),
    (r"direct_copy_kernel.*LoadWithCast", "cast"),  # a copy that converts dtype on load
    (r"(?:Load|Store)With(?:out)?Cast", "elementwise"),  # PyTorch memory policies, not cast kernels
    (r"(?i)float16_copy|bfloat16_copy|to_copy|[^o]cast|^cast|float2half|half2float", "cast"),  # not "nocast"
    (r"(?i)adam|sgd|momentum|lamb[^d]|lamb$|adagrad|rmsprop|multi_tensor_apply|update_scale|non_finite", "optimizer"),
    (r"(?i)unscale|betapow", "optimizer"),
    (r"(?i)flash|fmha|attention|sdpa|mha_", "attention"),
    (r"(?i:conv|depthwise|fprop|implicit_?gemm|scudnn|winograd|fft|gcgemm|offsetskernel)|dgrad|wgrad|Wgrad", "conv"),
    (r"distribution_", "elementwise"),  # random number kernels (normal_, uniform_), not reductions
    (r"fbgemm_gpu", "elementwise"),
    (r"(?i)gemm|nvjet|matmul|cublas|gemv|splitkreduce|cutlass|^Cijk_", "gemm"),
    (r"(?i)reduce|softmax|norm|sum_|mean|argmax|argmin|cub::|scan|topk|sort|welford|loss|bn_fw|bn_bw|pool"
     r"|gammabeta|ctc|compute_alpha|compute_probs", "reduction"),
    (r"(?i)elementwise|elemwise|vectorized|unrolled|pointwise|fill|copy|index|scatter|gather|functor|relu|gelu"
     r"|silu|glu|sigmoid|tanh|dropout|philox|where|cat|embedding|clamp|add|mul|div|pad|flip|select|split|range"
     r"|eigenmetakernel|scalepacked|nvfuser", "elementwise"),
)  # fmt: skip


def _first_match(name: pl.Expr, rules: tuple[tuple[str, object], ...], default: object) -> pl.Expr:
    expr = pl.lit(default)
    for pattern, value in reversed(rules):
        expr = pl.when(name.str.contains(pattern)).then(pl.lit(value)).otherwise(expr)
    return expr


def precision(name: pl.Expr) -> pl.Expr:
    """Numeric precision a kernel computes in, from its name (``unknown`` when the name does not say)."""
    return _first_match(name, PRECISION_RULES, "unknown")


def tensor_core(name: pl.Expr) -> pl.Expr:
    """Whether a kernel runs on tensor cores, from its name."""
    return _first_match(name, TENSOR_CORE_RULES, False)


def kernel_class(name: pl.Expr) -> pl.Expr:
    """What the kernel does: gemm, conv, attention, elementwise, reduction, cast, layout, ..."""
    return _first_match(name, CLASS_RULES, "other")


def classify(names: pl.Series) -> pl.DataFrame:
    """One row per distinct name: ``name``, ``precision``, ``tensor_core``, ``kernel_class``."""
    frame = pl.DataFrame({"name": names.drop_nulls().unique().sort()}, schema={"name": pl.String})
    return frame.with_columns(
        precision(pl.col("name")).alias("precision"),
        tensor_core(pl.col("name")).alias("tensor_core"),
        kernel_class(pl.col("name")).alias("kernel_class"),
    )


def classify_kernels(tables: RunTables, kernel_names: pl.Series | None = None) -> None:
    """Fill ``tables.kernel_classes`` from every kernel name the tables hold (``kernel_names``: those of
    ``events``, where the events are not in memory)."""
    if kernel_names is None:
        kernel_names = tables.collect().events.filter(pl.col("kind") == "kernel")["name"]
    names = pl.concat(
        [
            kernel_names,
            tables.op_stats.filter(pl.col("row_type") == "kernel")["name"],
            tables.kernel_stats["name"],
        ]
    )
    tables.kernel_classes = KERNEL_CLASS_TABLE.conform(classify(names))
