"""The marker of a test folder (registered in pyproject.toml), applied by the folder's conftest.py
to every test collected under it: ``pytest -m unit`` selects what ``pytest tests/unit`` runs."""
from __future__ import annotations

from pathlib import Path

import pytest


def mark_folder(items: list, folder: Path, marker: str) -> None:
    mark = getattr(pytest.mark, marker)
    for item in items:
        if folder in item.path.parents:
            item.add_marker(mark)
