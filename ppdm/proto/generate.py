"""Regenerate the Python code in ``ppdm/proto/ppdm/v1`` from ``proto/ppdm/v1/*.proto``.

Run ``python -m ppdm.proto.generate`` from the repository root after editing a .proto
file; a test regenerates into a temporary folder and fails if the committed code differs.
Needs ``grpcio-tools`` (in the ``dev`` extra).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROTO_ROOT = REPO / "proto"
OUT_ROOT = REPO / "ppdm" / "proto"

# Imports in generated code are absolute ("from ppdm.v1 import ..."); rewrite them to
# the package we ship them in.
_IMPORT = re.compile(r"^from ppdm\.v1 import", re.MULTILINE)


def generate(out_root: Path = OUT_ROOT) -> list[Path]:
    """Run protoc (from grpcio-tools) on every .proto file; return the files written."""
    from grpc_tools import protoc  # type: ignore[import-untyped]
    import grpc_tools

    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    include = str(Path(grpc_tools.__file__).parent / "_proto")
    out_root.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed")
    written = sorted((out_root / "ppdm" / "v1").glob("*.py*"))
    for path in written:
        text = path.read_text()
        path.write_text(_IMPORT.sub("from ppdm.proto.ppdm.v1 import", text))
    for pkg in (out_root / "ppdm", out_root / "ppdm" / "v1"):
        init = pkg / "__init__.py"
        if not init.exists():
            init.write_text("")
    return written


if __name__ == "__main__":
    for p in generate():
        print(p.relative_to(REPO) if p.is_relative_to(REPO) else p)
    sys.exit(0)
