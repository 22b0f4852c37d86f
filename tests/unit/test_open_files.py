"""`pqs serve` raises its soft limit of open files to what its connection limit needs (a systemd
service starts at 1,024), and says so when the hard limit is lower. Each case runs in a subprocess
started with the limits set, as a service manager would start it."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

PROBE = """
import resource
from app.cli import open_files_for
warning = open_files_for({needed})
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], "warned" if warning else "quiet")
"""


def run(soft: int, hard: int, needed: int) -> str:
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(needed=needed)],
        preexec_fn=limits,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture(autouse=True)
def _room() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.fail(f"this machine's hard limit of open files ({hard}) is below what the test sets")


def test_the_soft_limit_is_raised_to_what_is_needed() -> None:
    assert run(256, 4096, 1_088) == "1088 quiet"


def test_a_soft_limit_already_high_enough_stays() -> None:
    assert run(4096, 4096, 1_088) == "4096 quiet"


def test_a_hard_limit_too_low_raises_what_it_can_and_warns() -> None:
    assert run(256, 512, 1_088) == "512 warned"
