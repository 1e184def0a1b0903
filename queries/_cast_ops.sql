-- _cast_ops: which op names convert dtype (the one definition; every cast metric reads it).
-- Definition: a conversion is a Paddle `cast` op (`cast`, `cast dygraph`, `pd_op.cast`) or its grad
-- (`cast_grad`, `CastGradNode`) or a PyTorch `aten::_to_copy`; the cast family adds the ops that wrap a
-- conversion: `aten::to`, `ToCopyBackward0` and its autograd `evaluate_function`. (An `aten::copy_`
-- between two dtypes is a conversion too; that needs its recorded dtypes, so cast_overhead tests it.)
-- Reads: nothing.
-- Columns:
--   conversion  VARCHAR  regex matching op names that convert dtype
--   family      VARCHAR  regex matching conversions and the ops that wrap them
SELECT '^(?:pd_op\.)?cast(?: dygraph)?$|^cast_grad|CastGradNode|^aten::_to_copy$' AS conversion,
       '^(?:pd_op\.)?cast(?: dygraph)?$|^cast_grad|CastGradNode|^aten::_to_copy$|^aten::to$|ToCopyBackward0$' AS family
