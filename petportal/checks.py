"""Reliability and security figures: `python -m petportal.checks` runs the test suite and prints them.

The figures come from the tests themselves (tests/conftest.py counts as they run); this only runs
pytest from a source checkout, with the test extra installed, and prints what it counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    (
        "Hostile inputs tried: Hypothesis over every form and query parameter, hostile `next` values, XSS names",
        "hostile_inputs",
    ),
    ("Upstream faults injected: 16 fault kinds x listPets, getPet, createPet", "faults_injected"),
    (
        "Responses, redirects, cookies and log lines scanned for API keys, passwords, session secret",
        "responses_scanned",
    ),
    ("Secrets found in them", "secrets_found"),
    ("Concurrent submissions (20 threads, double clicks, injected read timeouts)", "submissions"),
    ("Duplicate animals, counted from what the store accepted", "duplicates"),
    ("Lost animals, counted from what the store accepted", "lost"),
    ("Tests failed", "tests_failed"),
    ("Tests skipped (each skipped test's figures are missing above)", "tests_skipped"),
]


def table(figures: Mapping[str, Any]) -> str:
    """The figures as a Markdown table, then why tests were skipped, so a missing figure has a reason."""
    lines = ["| check | figure |", "|---|---:|"]
    lines += [f"| {label} | {figures.get(key, 'not measured')} |" for label, key in ROWS]
    for reason, count in sorted(figures.get("skipped_reasons", {}).items()):
        lines.append(f"| Skipped: {reason} | {count} |")
    return "\n".join(lines)


def main(pytest_args: Sequence[str]) -> int:
    """Run the suite, then print its figures; the exit status is pytest's."""
    with tempfile.TemporaryDirectory() as folder:
        figures_file = Path(folder) / "figures.json"
        env = {**os.environ, "PETPORTAL_FIGURES_FILE": str(figures_file)}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args]
        result = subprocess.run(command, cwd=PROJECT_ROOT, env=env, check=False)
        figures = json.loads(figures_file.read_text()) if figures_file.exists() else {}
    print()
    print(table(figures))
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
