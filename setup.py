"""The compiled parts of ppdm: the Eclat kernel of local mining (``ppdm.mining._eclat``)
and the bit-matrix transpose of OT extension (``ppdm.protocols.ot._bits``).

Everything else is in ``pyproject.toml``. Both extensions are optional: when no C compiler
is available the install still succeeds and ``ppdm.mining.kernel`` uses its numpy Eclat,
``ppdm.protocols.ot.bits`` its numpy transpose.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ppdm.mining._eclat",
            sources=["ppdm/mining/_eclat.c"],
            extra_compile_args=["-O3", "-std=c99"],
            optional=True,
        ),
        Extension(
            "ppdm.protocols.ot._bits",
            sources=["ppdm/protocols/ot/_bits.c"],
            extra_compile_args=["-O3", "-std=c99"],
            optional=True,
        ),
    ]
)
