-- _kernels: kernels in the analysis windows with their class, precision and tensor-core use.
-- Requires: _gpu_work, _compute_classes
-- Definition: each kernel's class, precision and tensor-core use come from `kernel_classes` (the one
-- kernel-name rule table). Where the name does not reveal the precision, the input dtypes the framework
-- recorded on the launching op decide (PyTorch `Input type`, Paddle `input_dtypes`): half -> fp16,
-- bfloat16 -> bf16, float -> fp32.
-- Reads: _gpu_work (which carries each kernel's row of kernel_classes), events(input_dtypes of the
-- launching op), _compute_classes.
-- Columns:
--   run_id        VARCHAR  run id
--   rank          BIGINT   rank
--   step          INTEGER  window's step
--   device        INTEGER  GPU index
--   event_id      BIGINT   the kernel
--   op_id         BIGINT   innermost op that launched it
--   top_op_id     BIGINT   top-level op that launched it
--   dur_ns        BIGINT   duration inside the window, ns
--   kernel_class  VARCHAR  gemm, conv, attention, elementwise, ...
--   precision     VARCHAR  fp32, tf32, fp16, bf16, fp8, int8, fp64 or unknown
--   tensor_core   BOOLEAN  runs on tensor cores
--   compute       BOOLEAN  a compute kernel (gemm, conv or attention: see _compute_classes)
SELECT g.run_id, g.rank, g.step, g.device, g.event_id, g.op_id, g.top_op_id,
       (g.end_ns - g.start_ns)::BIGINT AS dur_ns, g.kernel_class,
       CASE WHEN g.kernel_precision <> 'unknown' THEN g.kernel_precision
            WHEN list_has_any(o.input_dtypes, ['c10::Half', 'float16', 'half']) THEN 'fp16'
            WHEN list_has_any(o.input_dtypes, ['c10::BFloat16', 'bfloat16']) THEN 'bf16'
            WHEN list_has_any(o.input_dtypes, ['float', 'float32']) THEN 'fp32'
            ELSE 'unknown' END AS precision,
       g.tensor_core,
       g.kernel_class IN (SELECT kernel_class FROM _compute_classes) AS compute
FROM _gpu_work g
LEFT JOIN events o  -- only ops with input dtypes can tell a precision: the others are not read
  ON o.run_id = g.run_id AND o.rank = g.rank AND o.event_id = g.op_id AND o.input_dtypes IS NOT NULL
WHERE g.kind = 'kernel'
