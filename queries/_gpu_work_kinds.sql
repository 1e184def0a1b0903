-- _gpu_work_kinds: the event kinds that occupy a GPU engine (GPU work).
-- Definition: kernels, memory copies and memory sets; sync records (waits) and GPU-side annotations lie
-- on a GPU but are not work. The list of `traceq.schema.GPU_WORK_KINDS`, for queries that join it.
-- Reads: nothing.
-- Columns:
--   kind  VARCHAR  an event kind of GPU work
SELECT unnest(gpu_work_kinds()) AS kind
