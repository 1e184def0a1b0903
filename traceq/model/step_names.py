"""The name of a profiler step, the one rule every stage reads (the model in Python, the queries as the SQL
macro ``is_profiler_step``); kept free of imports so that the query engine loads it at once."""

#: A profiler step's name: PyTorch ``ProfilerStep#12``, Paddle ``ProfileStep#12``; its number fits the steps'
#: Int32 (``ProfilerStep#99999999999`` is a range of that name, not a profiler step).
STEP_NAME = r"^Profiler?Step#(\d{1,9})$"
