"""The benchmark command still runs end to end (its figures are read by people, never asserted here)."""

import re
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
    result = run_bench("bench", "--smoke", "--memory-requests", "100")
    ratio = r"\d+\.\d\d \(\d+\.\d\d-\d+\.\d\d\)"
    megabytes = r"\d+"
    # Each row with a figure in the columns that must have one: granian at limit 20, granian at limit 100,
    # gunicorn at limit 20; the target last.
    for label, granian, granian_100, gunicorn in (
        ("portal p50 / bare page p50, c=1, cache off", ratio, "", ""),
        ("portal rps / bare page rps, c=8, cache off", ratio, "", ""),
        ("portal p50 / store p50, c=1, cache off", ratio, ratio, ratio),
        ("portal rps / store rps, c=8, cache off", ratio, ratio, ratio),
        ("bare Flask page p50 / store p50, c=1 (the least a page over the store costs)", ratio, "", ""),
        ("bare Flask page rps / store rps, c=8 (the least a page over the store costs)", ratio, "", ""),
        ("cached portal rps / store rps, c=8", ratio, ratio, ratio),
        ("cached portal rps / floor rps, c=8 (the server's constant 9 kB)", ratio, ratio, ratio),
        ("German page p50 / English page p50, c=1 (translation's cost)", ratio, "", ""),
        ("German page rps / English page rps, c=8 (translation's cost)", ratio, "", ""),
        ("traced portal p50 / portal p50, c=1 (tracing's cost)", ratio, "", ""),
        ("traced portal rps / portal rps, c=8 (tracing's cost)", ratio, "", ""),
        ("peak RSS per portal worker (MB)", megabytes, "", megabytes),
    ):
        row = re.escape(f"| {label} |") + rf" {granian} \| {granian_100} \| {gunicorn} \| [^|]+ \|$"
        assert re.search(row, result.stdout, re.MULTILINE), f"no figures for {label!r}"
    for line in ("| floor granian | 8 | - |", "| floor gunicorn | 8 | - |", "slow environment", "the sink took"):
        assert line in result.stdout
    assert "| one portal worker's RSS (MB) |" in result.stdout
    # CPU a request: the store's workers for every target, and each server's own beside them.
    for target in ("portal granian | 8 | 20", "bare granian | 1 | 20", "cached gunicorn | 8 | 20"):
        assert re.search(rf"^\| {re.escape(target)} \| \d+\.\d{{3}} \| \d+\.\d{{3}} \|$", result.stdout, re.M), target


def test_the_render_benchmark_runs_and_prints_both_sizes():
    result = run_bench("bench.render", "--repeat", "5", "--batches", "1")
    assert "| 20 |" in result.stdout and "| 100 |" in result.stdout


def test_the_import_benchmark_runs_and_prints_its_ratio():
    result = run_bench("bench.imports", "--rows", "20", "--rounds", "1")
    assert "| import rate / store rate |" in result.stdout
    assert "| list page p50, while an import runs (ms) |" in result.stdout
