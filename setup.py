"""The compiled part of ppdm: the Eclat kernel of local mining (``ppdm.mining._eclat``).

Everything else is in ``pyproject.toml``. The extension is optional: when no C compiler is
available the install still succeeds and ``ppdm.mining.kernel`` uses its numpy Eclat.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ppdm.mining._eclat",
            sources=["ppdm/mining/_eclat.c"],
            extra_compile_args=["-O3", "-std=c99"],
            optional=True,
        )
    ]
)
