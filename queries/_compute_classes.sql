-- _compute_classes: the kernel classes whose precision and tensor-core use decide AMP's gain ("compute kernels").
-- Definition: GEMM, convolution and attention kernels (`kernel_class` of `kernel_classes`, the one
-- kernel-name rule table): the work half precision and tensor cores speed up. The one list of them:
-- every coverage metric reads it here.
-- Reads: nothing.
-- Columns:
--   kernel_class  VARCHAR  a compute kernel class
SELECT unnest(['gemm', 'conv', 'attention']) AS kernel_class
