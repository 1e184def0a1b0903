"""Build of the optional native parts (chrome-trace decoder, range nesting); the rest is in pyproject.toml.

The extensions are optional: where no C compiler is available, traceq installs without them and uses
its pure-Python paths (msgspec decoding, the Python nesting walk), which give the same tables, slower.
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers"]

setup(
    ext_modules=[
        Extension(name, sources=[source], extra_compile_args=_FLAGS, optional=True)
        for name, source in (
            ("traceq.readers.chrome._scan", "traceq/readers/chrome/_scan.c"),
            ("traceq.model._nest_scan", "traceq/model/_nest_scan.c"),
        )
    ]
)
