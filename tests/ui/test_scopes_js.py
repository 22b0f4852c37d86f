"""The dashboard decides which buttons to draw from the key's grants (app/ui/static/scopes.js);
it must read a grant as the server does (app/access.py, `Access.allows`), or it would offer what
the API refuses, or hide what a key may do. Both read the same cases here; Node.js runs the
module as the browser would load it."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess

from app.access import ACTIONS, Access, grant
from app.api.routes_ui import STATIC

PATTERNS = ["*", "**", "jobs-*", "jobs-?", "*.fifo", "[!a]*", "a[bc].fifo", "[a-c]x", "x[!0-9]", "exact", "a-b_c", "?"]
NAMES = ["jobs-1", "jobs-12", "jobs-", "a.fifo", "ab.fifo", "ac.fifo", "ad.fifo", "bx", "dx", "x1", "xa", "exact"]
NAMES += ["exactly", "a-b_c", "b", "aaa", "jobs.fifo", "A"]


def test_the_page_reads_grants_as_the_server_does() -> None:
    node = shutil.which("node")
    assert node, "Node.js is missing: run `make node-deps`"
    cases = [
        {"grants": [{"queues": pattern, "actions": list(actions)}], "action": action, "queue": queue}
        for pattern in PATTERNS
        for actions in (("send",), ("receive", "admin"))
        for action in ACTIONS
        for queue in (None, *NAMES)
    ]
    cases += [
        {"grants": [{"queues": "jobs-*", "actions": ["send"]}, {"queues": "*", "actions": ["admin"]}]}
        | {"action": action, "queue": queue}
        for action, queue in itertools.product(ACTIONS, (None, "jobs-1", "other"))
    ]
    module = (STATIC / "scopes.js").as_uri()
    program = (
        f"import {{ allows }} from {json.dumps(module)};\n"
        "let text = '';\n"
        "for await (const chunk of process.stdin) text += chunk;\n"
        "const cases = JSON.parse(text);\n"
        "console.log(JSON.stringify(cases.map((c) => allows(c.grants, c.action, c.queue))));\n"
    )
    ran = subprocess.run(
        [node, "--input-type=module", "-e", program], input=json.dumps(cases), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    page = json.loads(ran.stdout)
    server = [
        Access("k", tuple(grant(g["queues"], g["actions"]) for g in c["grants"])).allows(c["action"], c["queue"])
        for c in cases
    ]
    differ = [(case, p, s) for case, p, s in zip(cases, page, server, strict=True) if p != s]
    assert differ == [], differ[:5]
    assert any(server) and not all(server)
