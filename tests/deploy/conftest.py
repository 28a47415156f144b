"""Fixtures of the deploy/ tests: the Dockerfile, parsed."""

from __future__ import annotations

from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def parse_dockerfile(path: Path) -> list[list[tuple[str, str]]]:
    """The stages of a Dockerfile, each a list of (INSTRUCTION, arguments), with line
    continuations joined and comments dropped."""
    stages: list[list[tuple[str, str]]] = [[]]
    logical = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not logical and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        logical += line
        word, _, rest = logical.partition(" ")
        instruction = (word.upper(), rest.strip())
        if instruction[0] == "FROM":
            stages.append([])
        stages[-1].append(instruction)
        logical = ""
    assert not logical, "a continued instruction runs off the end of the file"
    return stages


@pytest.fixture(scope="module")
def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages: the ARGs before the first FROM, the build stage, the
    runtime stage."""
    return parse_dockerfile(DEPLOY / "Dockerfile")
