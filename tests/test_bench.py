"""The benchmark command still runs end to end (its figures are read by people, never asserted here)."""

import shutil
import subprocess
import sys

import pytest

from servers import PROJECT_ROOT, portal_environment

pytestmark = pytest.mark.slow


def test_the_benchmark_runs_and_prints_its_table():
    if not shutil.which("wrk"):
        pytest.skip("wrk is not installed (apt-get install wrk): the benchmark needs it")
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--seconds", "1", "--rounds", "1"],
        cwd=PROJECT_ROOT,
        env=portal_environment(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for row in (
        "| portal p50 / (store p50 + bare p50), c=1, cache off |",
        "| portal rps / (1/(1/store rps + 1/bare rps)), c=8, cache off |",
        "| portal rps cached / store rps direct, c=8 |",
        "| peak RSS per portal worker (MB) |",
        "slow environment:",
    ):
        assert row in result.stdout
