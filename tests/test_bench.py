"""The benchmark commands still run end to end (their figures are read by people, never asserted here)."""

import re
import shutil
import subprocess
import sys

import pytest

from support.portal import PROJECT_ROOT, portal_environment

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


def test_the_benchmark_runs_and_prints_issue_41s_four_figures():
    """`--figures` loads what the four figures need (the portal, cached and not, the bare page and the floor under
    granian), the same code as the whole table's runs, in a quarter of its time."""
    if not shutil.which("wrk"):
        pytest.skip("wrk is not installed (apt-get install wrk): the benchmark needs it")
    result = run_bench("bench", "--figures", "--smoke")
    ratio = r"\d+\.\d\d \(\d+\.\d\d-\d+\.\d\d\)"
    for label, figure in (
        ("uncached portal / bare page, p50 at c=1", ratio),
        ("uncached portal / bare page, rps at c=8", ratio),
        ("cached portal / floor, rps at c=8", ratio),
        ("peak RSS per worker (MB)", r"\d+"),
    ):
        row = re.escape(f"| {label} |") + rf" {figure} \|$"
        assert re.search(row, result.stdout, re.MULTILINE), f"no figure for {label!r}"
    assert re.search(r"^granian: portal p50 [\d.]+ ms at c=1, [\d,]+ req/s at c=8", result.stdout, re.MULTILINE)


def test_the_render_benchmark_runs_and_prints_both_sizes():
    result = run_bench("bench.render", "--repeat", "5", "--batches", "1")
    assert "| 20 |" in result.stdout and "| 100 |" in result.stdout


def test_the_import_benchmark_runs_and_prints_its_ratio():
    result = run_bench("bench.imports", "--rows", "20", "--rounds", "1")
    assert "| import rate / store rate |" in result.stdout
    assert "| list page p50, while an import runs (ms) |" in result.stdout


def test_the_soak_runs_and_prints_each_workers_memory_and_descriptors():
    """A soak of 18 s: the start (after 10 s of load) and the end, each worker's RSS and descriptors."""
    result = run_bench("bench", "--soak", "0.3", "--connections", "4")
    worker = r"worker \d+: \d+\.\d MB, \d+ fds"
    taken = re.findall(rf"^\s+(start|end) \(\s*\d+ s, [\d,]+ answers\): {worker}; {worker}$", result.stdout, re.M)
    assert taken == ["start", "end"], result.stdout
    assert re.search(r"^answers: .*\b200 [\d,]+", result.stdout, re.MULTILINE), result.stdout
