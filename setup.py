"""Build of the optional native parts (chrome-trace decoder, range nesting, the replay's visit); the rest
is in pyproject.toml.

The extensions are optional: where no C compiler is available, traceq installs without them and uses
its pure-Python paths (msgspec decoding, the Python nesting walk and replay loop), which give the same
tables, slower.
The decoder's columns and args keys are declared once, in ``traceq/readers/chrome/columns.py``: the
header the C scanner includes is written from it here, before the build.
"""

import runpy
from pathlib import Path

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers"]
_ROOT = Path(__file__).resolve().parent
_GENERATED = _ROOT / "build" / "generated"

_GENERATED.mkdir(parents=True, exist_ok=True)
_header = runpy.run_path(str(_ROOT / "traceq/readers/chrome/columns.py"))["c_header"]()
if not (_GENERATED / "_scan_columns.h").is_file() or (_GENERATED / "_scan_columns.h").read_text() != _header:
    (_GENERATED / "_scan_columns.h").write_text(_header)

setup(
    ext_modules=[
        Extension(name, sources=[source], extra_compile_args=_FLAGS, include_dirs=[str(_GENERATED)], optional=True)
        for name, source in (
            ("traceq.readers.chrome._scan", "traceq/readers/chrome/_scan.c"),
            ("traceq.model._nest_scan", "traceq/model/_nest_scan.c"),
            ("traceq.analysis.replay._replay_walk", "traceq/analysis/replay/_replay_walk.c"),
        )
    ]
)
