"""The benchmark command still runs end to end (its figures are read by people, never asserted here)."""

import shutil
import subprocess
import sys

import pytest

from bench.portal import PROJECT_ROOT, portal_environment

pytestmark = pytest.mark.slow


def run_bench(*arguments):
    """`python -m <arguments>` from the checkout, as a reader runs it; its output, having checked it succeeded."""
    result = subprocess.run(
        [sys.executable, "-m", *arguments],
        cwd=PROJECT_ROOT,
        env=portal_environment(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_the_benchmark_runs_and_prints_its_table():
    if not shutil.which("wrk"):
        pytest.skip("wrk is not installed (apt-get install wrk): the benchmark needs it")
    result = run_bench("bench", "--seconds", "1", "--rounds", "1", "--memory-requests", "100")
    for row in (
        "| portal p50 / store p50, c=1, cache off |",
        "| portal rps / store rps, c=8, cache off |",
        "| cached portal rps / store rps, c=8 |",
        "| peak RSS per portal worker (MB) |",
        "slow environment:",
        "| one portal worker's RSS (MB) |",
    ):
        assert row in result.stdout


def test_the_render_benchmark_runs_and_prints_both_sizes():
    result = run_bench("bench.render", "--repeat", "5", "--batches", "1")
    assert "| 20 |" in result.stdout and "| 100 |" in result.stdout


def test_the_import_benchmark_runs_and_prints_its_ratio():
    result = run_bench("bench.imports", "--rows", "20", "--rounds", "1")
    assert "| import rate / store rate |" in result.stdout
    assert "| list page p50, while an import runs (ms) |" in result.stdout
