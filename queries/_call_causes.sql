-- _call_causes: which host call names stand for which idle cause (the one rule table for it).
-- Requires: _cast_ops
-- Definition: each distinct (kind, name) of the host events that can explain GPU idle time, with its
-- cause: 'input_pipeline' for data-loading ranges (PyTorch `enumerate(DataLoader)#...`, a Dataset's
-- `__getitem__` or `collate` frame, Paddle's `Dataloader` ranges); 'host_sync' for runtime calls that
-- block the host until the device is done (stream, device, thread or event synchronise, a synchronous memcpy,
-- Paddle's versioned names such as `cudaStreamSynchronize_v3020` too); 'allocator' for device memory
-- allocation and release (cudaMalloc/cudaFree and their driver and HIP forms); 'cast_overhead' for ops of
-- the cast family (see _cast_ops); 'launch_overhead' for any other op, stage or runtime call. Names
-- are matched once each, not once per call.
-- Reads: events(kind, name), _cast_ops.
-- Columns:
--   kind   VARCHAR  event kind
--   name   VARCHAR  event name
--   cause  VARCHAR  input_pipeline, host_sync, allocator, cast_overhead or launch_overhead (NULL: none)
SELECT n.kind, n.name,
       CASE
         WHEN n.kind IN ('annotation', 'python', 'op', 'op_inner', 'other')
          AND regexp_matches(n.name, '(?i)dataloader|__getitem__|collate|_next_data|dataset\.py')
           THEN 'input_pipeline'
         WHEN n.kind = 'runtime' AND regexp_matches(n.name,
           '^(cuda|cu|hip)(Stream|Device|Ctx|Event|Thread)Synchroni[sz]e|^cudaMemcpy(2D|3D)?(ToSymbol|FromSymbol)?(_v\d+)?$|^cuMemcpy[DH]to[DH](_v\d+)?$|^hipMemcpy$')
           THEN 'host_sync'
         WHEN n.kind = 'runtime' AND regexp_matches(n.name,
           '^(cuda|hip)(Malloc|Free)(Host|Managed|Pitch|Array)?(_v\d+)?$|^cudaHostAlloc(_v\d+)?$|^cuMem(Alloc|Free|Create|Release|Map|Unmap)')
           THEN 'allocator'
         WHEN n.kind IN ('op', 'op_inner') AND regexp_matches(n.name, c.family) THEN 'cast_overhead'
         WHEN n.kind IN ('op', 'op_inner', 'runtime') THEN 'launch_overhead'
       END AS cause
FROM (SELECT DISTINCT kind, name FROM events
      WHERE kind IN ('op', 'op_inner', 'runtime', 'annotation', 'python', 'other')) n
CROSS JOIN _cast_ops c
