"""The image, built and run: on a base made here with debootstrap (Debian bookworm + python3), by
buildah without a daemon (vfs storage, chroot isolation), so no image registry is needed. The
container migrates when asked to (`pqs migrate`, its own step), then serves /readyz, and its own
HEALTHCHECK command passes.

Opt-in (several minutes, root, Debian's mirror): collected only with PQS_IMAGE_TEST=1, as `make
image-test` runs it (tests/image/conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.image.dockerfile import ROOT, instructions

MIRROR = os.environ.get("PQS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# Made once, reused by later runs: the debootstrapped root file system, as a tar.
BASE_TAR = ROOT / ".pqs" / "image" / "bookworm-python3.tar"
BASE_TAG = "localhost/pqs-base:bookworm"
IMAGE_TAG = "localhost/pqs:test"
UID = 10001
STEP_SECONDS = 1800


def run(*argv: str, timeout: float = STEP_SECONDS) -> str:
    """Run a command; its stdout, or a failure that shows what it said."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def buildah(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The buildah command line, its image store in a directory of this test run's own."""
    for tool in ("buildah", "debootstrap"):
        assert shutil.which(tool) or Path("/usr/sbin", tool).exists(), f"{tool} is missing: make image-test"
    assert os.geteuid() == 0, "buildah (vfs, chroot) and debootstrap need root here"
    store = tmp_path_factory.mktemp("buildah")
    command = ["buildah", "--root", str(store / "root"), "--runroot", str(store / "run"), "--storage-driver", "vfs"]
    yield command
    run(*command, "rm", "--all")


@pytest.fixture(scope="module")
def base(buildah: list[str], tmp_path_factory: pytest.TempPathFactory) -> str:
    """An image of Debian bookworm with python3 and venv, from debootstrap."""
    if not BASE_TAR.exists():
        rootfs = tmp_path_factory.mktemp("rootfs")
        debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
        run(debootstrap, "--variant=minbase", "--include=python3,python3-venv", "bookworm", str(rootfs), MIRROR)
        BASE_TAR.parent.mkdir(parents=True, exist_ok=True)
        run("tar", "-C", str(rootfs), "-cf", str(BASE_TAR) + ".part", ".")
        os.replace(str(BASE_TAR) + ".part", BASE_TAR)
    context = tmp_path_factory.mktemp("base")
    os.link(BASE_TAR, context / "rootfs.tar")
    (context / "Containerfile").write_text('FROM scratch\nADD rootfs.tar /\nCMD ["python3"]\n')
    run(*buildah, "bud", "--isolation", "chroot", "-t", BASE_TAG, str(context))
    return BASE_TAG


@pytest.fixture(scope="module")
def image(buildah: list[str], base: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The project's image, built from its Dockerfile on `base`."""
    # pip in the build trusts what pip here trusts (a proxy's CA, say): the build machine's CA
    # bundle and a pip.conf naming it, bind-mounted for the RUN steps only, not in the image.
    bundle = os.environ.get("PIP_CERT") or ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt"
    conf = tmp_path_factory.mktemp("pip") / "pip.conf"
    conf.write_text("[global]\ncert = /etc/pqs-build-ca.crt\n")
    run(
        *buildah, "bud", "--isolation", "chroot", "--format", "docker",
        "-v", f"{bundle}:/etc/pqs-build-ca.crt:ro", "-v", f"{conf}:/etc/pip.conf:ro",
        "--build-arg", f"BASE={base}", "-t", IMAGE_TAG, str(ROOT),
    )  # fmt: skip
    return IMAGE_TAG


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_image_records_its_user_and_health_check(buildah: list[str], image: str) -> None:
    config = json.loads(run(*buildah, "inspect", "--type", "image", image))["Docker"]["config"]
    assert config["User"] == str(UID)
    assert config["Cmd"] == ["pqs", "serve"]
    assert "/readyz" in " ".join(config["Healthcheck"]["Test"])


def test_the_container_migrates_when_asked_then_serves(buildah: list[str], image: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, UID, UID)
    port = free_port()
    container = run(*buildah, "from", image).strip()
    runs = [*buildah, "run", "--isolation", "chroot", "--network", "host", "-e", f"PQS_PORT={port}"]
    runs += ["-v", f"{data}:/var/lib/pqs", container, "--"]
    assert run(*runs, "id", "-u").strip() == str(UID)
    # Not asked: `pqs serve` on a database never migrated does not migrate it, and cannot serve.
    refused = subprocess.run([*runs, "pqs", "serve"], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "run `pqs migrate` first" in refused.stderr
    run(*runs, "pqs", "migrate", timeout=300)
    server = subprocess.Popen([*runs, "pqs", "serve"], start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, f"pqs serve exited {server.returncode}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "no 200 from /readyz within 120 s"
            time.sleep(0.5)
        check = next(arguments for keyword, arguments in instructions() if keyword == "HEALTHCHECK")
        run(*runs, *json.loads(check.split(" CMD ", 1)[1]), timeout=60)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        # The embedded server outlives the service here (chroot isolation has no PID namespace
        # to end with it): stop it with the image's own pg_ctl, as the image's user.
        if (data / "pgdata" / "postmaster.pid").exists():
            stop = '"$(echo /opt/pqs/lib/python3*/site-packages/pgserver/pginstall/bin/pg_ctl)" -D "$1" -m fast stop'
            run(*runs, "sh", "-c", stop, "sh", "/var/lib/pqs/pgdata", timeout=60)
