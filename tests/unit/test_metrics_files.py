"""The multiprocess exposition reads every process's values file, also while a process is
starting: prometheus-client creates a file empty and sizes it a moment later."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.mmap_dict import MmapedDict, mmap_key

from app.metrics import MULTIPROC_VARIABLE, exposition


def test_a_file_not_yet_sized_is_skipped_and_the_others_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MULTIPROC_VARIABLE, str(tmp_path))
    written = MmapedDict(str(tmp_path / "counter_4241.db"))  # a worker that counted 7 sends
    written.write_value(
        mmap_key("pqs_requests", "pqs_requests_total", ["operation", "status"], ["send_message", "201"], "Requests."),
        7.0,
        0.0,
    )
    written.close()
    (tmp_path / "counter_4242.db").touch()  # a worker between creating its file and sizing it

    text = exposition().decode()

    assert 'pqs_requests_total{operation="send_message",status="201"} 7.0' in text
