"""The README's declaration example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs(capsys) -> None:
    blocks = re.findall(r"<!-- readme-example -->\n```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README lost its runnable example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})  # noqa: S102
    assert "'kind': 'assets'" in capsys.readouterr().out
