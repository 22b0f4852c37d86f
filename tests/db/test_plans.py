"""The hot queries are index-driven: their plans must not scan the message or group tables.

A backlog is preloaded with generate_series (20k messages over 2,000 groups, plus 20k in a
standard queue), the tables analysed, and each hot query EXPLAINed with real parameters, and as
the generic plan a pooled session keeps. An index regression (a dropped index, a rewritten
predicate) fails here.

Smaller loads too (3k messages in a standard queue alone; 100 in each): there a generic plan is
tempted to read a hot table whole (a small table looks cheaper to scan than to probe a few dozen
times), and it is kept for the connection while the backlog grows. The standard receive did so
below about 100k messages, until the pooled sessions turned sequential scans off.

Statements off the hot path are checked too (stats, purge, redrive, a visibility change's group
lease): each reads only the queue, or the groups, it is about.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.adapt import PyFormat, Transformer

from app.db.engine import SESSION_SETTINGS
from app.db.sql import QUERIES
from tests.conftest import create_database, drop_database

Conn = psycopg.Connection[tuple[Any, ...]]
# One worker runs the whole module (pytest-xdist), so its module-scoped loads are made once: spread
# over workers, each would make its own, and again after every run of another module's tests.
pytestmark = pytest.mark.xdist_group("plans")
HOT_TABLES = {"messages", "message_groups"}


def _load(conn: Conn, fifo_rows: int, standard_rows: int) -> None:
    """A FIFO queue (id 1) with `fifo_rows` messages over up to 2,000 groups, and a standard queue
    (id 2) with `standard_rows`; analysed."""
    groups = min(2_000, fifo_rows)
    conn.execute(
        "INSERT INTO queues (id, name, fifo, visibility_timeout, delay_seconds, retention_seconds,"
        " max_message_bytes, receive_wait_seconds, content_based_deduplication, deduplication_scope)"
        " OVERRIDING SYSTEM VALUE VALUES"
        " (1, 'f.fifo', true, 30, 0, 345600, 1048576, 0, false, 'queue'),"
        " (2, 's', false, 30, 0, 345600, 1048576, 0, false, 'queue')"
    )
    conn.execute(
        "INSERT INTO messages (queue_id, message_id, group_id, dedup_id, body, sent_at, visible_at)"
        " SELECT 1, gen_random_uuid(), 'g' || (i %% %s), 'd' || i, jsonb_build_object('i', i), now(), now()"
        " FROM generate_series(1, %s) AS i",
        (max(1, groups), fifo_rows),
    )
    conn.execute(
        "INSERT INTO message_groups (queue_id, group_id, available_at)"
        " SELECT 1, 'g' || g, now() - (g || ' seconds')::interval FROM generate_series(0, %s - 1) AS g",
        (groups,),
    )
    conn.execute(
        "INSERT INTO messages (queue_id, message_id, body, sent_at, visible_at)"
        " SELECT 2, gen_random_uuid(), jsonb_build_object('i', i), now(), now() FROM generate_series(1, %s) AS i",
        (standard_rows,),
    )
    conn.execute("ANALYZE")


BACKLOG = (20_000, 20_000)


@contextmanager
def loaded_database(server_url: str, template_db: str, rows: tuple[int, int], *then: str) -> Iterator[str]:
    """A database of its own, `_load`ed with `rows` (FIFO, standard), then `then` run; its URL.

    The plan checks only read (EXPLAIN; a staging table that drops at commit), so the tests of a
    module share a load: some 70 of them built the same 40k messages each, most of the module's
    time. Each test still opens a connection of its own (`connected`), so a session setting or
    a prepared statement a failing test leaves behind reaches no other."""
    name = f"pqs_t_{uuid.uuid4().hex[:16]}"
    url = create_database(server_url, name, template_db)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            _load(conn, *rows)
            for text in then:
                conn.execute(text)  # type: ignore[arg-type]
        yield url
    finally:
        drop_database(server_url, name)


@contextmanager
def connected(url: str) -> Iterator[Conn]:
    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def loaded_url(server_url: str, template_db: str) -> Iterator[str]:
    with loaded_database(server_url, template_db, BACKLOG) as url:
        yield url


@pytest.fixture
def loaded(loaded_url: str) -> Iterator[Conn]:
    with connected(loaded_url) as conn:
        yield conn


@pytest.fixture(scope="module", params=[(0, 3_000), (100, 100)], ids=["3k-standard", "100-each"])
def small_load_url(server_url: str, template_db: str, request: pytest.FixtureRequest) -> Iterator[str]:
    with loaded_database(server_url, template_db, request.param) as url:
        yield url


@pytest.fixture
def small_load(small_load_url: str) -> Iterator[Conn]:
    with connected(small_load_url) as conn:
        yield conn


PlanOf = Callable[[Conn, str, dict[str, Any]], dict[str, Any]]
# A standard queue's send (message_insert of the JSON entries, behind the send fence).
SEND = "message_send_fenced"


def statement(name: str) -> str:
    """The SQL text of a named block or variant."""
    return QUERIES[name].text


@contextmanager
def session_settings(conn: Conn) -> Iterator[None]:
    """The planner settings of the service's pooled sessions (app.db.engine), for a block."""
    for setting, value in SESSION_SETTINGS.items():
        conn.execute(f"SET {setting} = {value}")  # type: ignore[arg-type]
    try:
        yield
    finally:
        for setting in SESSION_SETTINGS:
            conn.execute(f"RESET {setting}")  # type: ignore[arg-type]


def custom_plan(conn: Conn, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The plan for these very values (what an unprepared statement gets in a pooled session)."""
    with session_settings(conn):
        row = conn.execute("EXPLAIN (FORMAT JSON) " + statement(name), params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return dict(document[0]["Plan"])


def generic_plan(conn: Conn, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The one plan a pooled session uses for the prepared statement, whatever the values
    (under the service's session settings): PREPARE it with $n parameters and EXPLAIN EXECUTE it."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in order:
            order.append(match[1])
        return f"${order.index(match[1]) + 1}"

    text = re.sub(r"%\((\w+)\)s", number, statement(name))
    values = [params[key] for key in order]
    # Declared with the types psycopg sends for these values (0: none, the server infers it).
    dumper = Transformer(conn)
    dumper.dump_sequence(values, [PyFormat.AUTO] * len(values))
    known = [oid for oid in dumper.types if oid]
    names = dict(conn.execute("SELECT o, o::regtype::text FROM unnest(%s::oid[]) AS o", (known,)).fetchall())
    declared = ", ".join("unknown" if oid == 0 else names[oid] for oid in dumper.types)
    conn.execute(f"PREPARE plan_check{f'({declared})' if values else ''} AS {text}")  # type: ignore[arg-type]
    try:
        with session_settings(conn):
            # EXECUTE takes no bind parameters: the values go in as literals.
            arguments = sql.SQL(", ").join(sql.Literal(value) for value in values)
            execute = sql.SQL("EXECUTE plan_check({})").format(arguments) if values else sql.SQL("EXECUTE plan_check")
            row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) {}").format(execute)).fetchone()
    finally:
        conn.execute("DEALLOCATE plan_check")
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return dict(document[0]["Plan"])


@pytest.fixture(params=["custom", "generic"])
def plan(request: pytest.FixtureRequest) -> PlanOf:
    """Each plan check runs on the plan for the given values and on the generic plan."""
    return custom_plan if request.param == "custom" else generic_plan


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from nodes(child)


def scans(tree: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(node type, index name) of every node reading a hot table."""
    return [(n["Node Type"], n.get("Index Name")) for n in nodes(tree) if n.get("Relation Name") in HOT_TABLES]


def assert_index_only(tree: dict[str, Any], *expected: str) -> None:
    found = scans(tree)
    assert found, "the plan reads no hot table at all"
    assert not [s for s in found if s[0] in ("Seq Scan", "Bitmap Heap Scan") and s[1] is None], found
    used = {index for _, index in found if index}
    for index in expected:
        assert index in used, f"{index} not used: {found}"


def test_standard_receive_walks_the_due_index(loaded: Conn, plan: PlanOf) -> None:
    tree = plan(
        loaded,
        "message_receive_standard",
        {"queue_id": 2, "limit": 10, "visibility_timeout": 30, "max_receive_count": None, "now": None},
    )
    assert_index_only(tree, "messages_standard_due_idx")


def test_group_locks_find_rows_by_key(loaded: Conn, plan: PlanOf) -> None:
    assert_index_only(plan(loaded, "group_lock_for_messages", {"queue_id": 1, "ids": [1, 2, 3]}), "messages_pkey")
    params = {"queue_id": 1, "ids": [1], "lease_ids": [uuid.uuid4()], "delays": [0], "errors": [None], "now": None}
    assert_index_only(plan(loaded, "message_nack", params), "messages_pkey")


def test_send_locks_groups_by_key(loaded: Conn, plan: PlanOf) -> None:
    tree = plan(
        loaded, "group_lock_for_send", {"queue_id": 1, "group_ids": ["g1", "new"], "delays": [0, 0], "now": None}
    )
    # An INSERT .. ON CONFLICT reads no hot table by scan; its arbiter is the primary key.
    assert not [s for s in scans(tree) if s[0] == "Seq Scan"]


def test_send_reads_no_hot_table_by_scan(loaded: Conn, plan: PlanOf) -> None:
    # An entry of each kind: plain, and with a dedup id (its claim goes by message_dedup's key).
    entries = json.dumps(
        [
            {"message_id": str(uuid.uuid4()), "body": {"n": 1}},
            {"message_id": str(uuid.uuid4()), "body": 2, "dedup_id": "d-1", "scope_key": ""},
        ]
    )
    tree = plan(loaded, SEND, {"lock_class": 1, "queue_id": 2, "entries": entries, "dedup_window": 300, "now": None})
    scanned = [n.get("Relation Name") for n in nodes(tree) if n["Node Type"] == "Seq Scan"]
    assert not set(scanned) & {*HOT_TABLES, "message_dedup"}, scanned


def index_reads(tree: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(node type, index name, index condition) of every index read of a hot table's rows; a Seq
    Scan of one comes out with no index name and no condition."""
    found = []
    for node in nodes(tree):
        kind = node["Node Type"]
        if kind == "Bitmap Index Scan" or (
            node.get("Relation Name") in HOT_TABLES and kind in ("Seq Scan", "Index Scan", "Index Only Scan")
        ):
            found.append((kind, node.get("Index Name", ""), node.get("Index Cond", "")))
    return found


def test_standard_redrive_walks_the_due_index(loaded: Conn, plan: PlanOf) -> None:
    # A standard dead-letter queue is redriven as a receive takes it, earliest due first. In id
    # order it walked the primary key of the whole table with a filter (a 100-message DLQ among
    # 2.8M messages: 105k buffers). No message here has a source: planned from that estimate,
    # `source_queue_id IS NOT NULL` read the queue's whole range (bitmap) and sorted it.
    params = {"queue_id": 2, "limit": 500, "now": None, "before_id": None, "source_queue_id": None}
    tree = plan(loaded, "redrive_pick_standard", params)
    reads = index_reads(tree)
    assert [(kind, index) for kind, index, _ in reads] == [("Index Scan", "messages_standard_due_idx")], reads
    assert "queue_id" in reads[0][2], reads


ANY_SUBSET = {"group_id": None, "source_queue_id": None}


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("redrive_pick_standard", {"queue_id": 2, "limit": 500, "now": None, "before_id": None, **ANY_SUBSET}),
        ("redrive_pick_groups", {"queue_id": 1, "limit": 500, "now": None, "before_id": None, **ANY_SUBSET}),
        (
            "redrive_pick_fifo",
            {"queue_id": 1, "group_ids": ["g1", "g2"], "limit": 500, "before_id": None, **ANY_SUBSET},
        ),
        # A move task's batches: up to its high-water mark.
        ("redrive_pick_standard", {"queue_id": 2, "limit": 500, "now": None, "before_id": 30_000, **ANY_SUBSET}),
        ("redrive_pick_groups", {"queue_id": 1, "limit": 500, "now": None, "before_id": 10_000, **ANY_SUBSET}),
        ("redrive_pick_fifo", {"queue_id": 1, "group_ids": ["g1"], "limit": 500, "before_id": 10_000, **ANY_SUBSET}),
        # A redrive of a subset (one group, one source queue), and the count its confirmation asks first.
        ("redrive_pick_standard", {"queue_id": 2, "limit": 500, "now": None, "before_id": None, "source_queue_id": 1}),
        (
            "redrive_pick_groups",
            {"queue_id": 1, "limit": 500, "now": None, "before_id": None, "group_id": "g1", "source_queue_id": 2},
        ),
        ("redrive_count_standard", {"queue_id": 2, "now": None, "source_queue_id": None}),
        ("redrive_count_standard", {"queue_id": 2, "now": None, "source_queue_id": 1}),
        ("redrive_count_fifo", {"queue_id": 1, "now": None, **ANY_SUBSET}),
        ("redrive_count_fifo", {"queue_id": 1, "now": None, "group_id": "g1", "source_queue_id": None}),
    ],
)
def test_redrive_reads_its_queue_not_every_dead_letter(
    loaded: Conn, plan: PlanOf, name: str, params: dict[str, Any]
) -> None:
    # messages_source_queue_idx (a queue delete's foreign key) holds the messages of every
    # dead-letter queue. Planned while few messages have a source (here: none), a pick that
    # matched its predicate read and sorted all of them on every call.
    reads = index_reads(plan(loaded, name, params))
    assert reads and all(kind != "Seq Scan" and "queue_id" in cond for kind, _, cond in reads), reads
    assert "messages_source_queue_idx" not in {index for _, index, _ in reads}, reads


def test_visibility_change_extends_its_groups_by_key(loaded: Conn, plan: PlanOf) -> None:
    # Each group in the list is found by its key and its leased messages by (queue, group,
    # lease): the groups and in-flight messages of the rest of the queue are not read. A join
    # driven by the queue read every group row of it (100k groups: 1,863 buffers a change).
    tree = plan(loaded, "group_extend", {"queue_id": 1, "group_ids": ["g1", "g2"]})
    reads = index_reads(tree)
    assert reads and all(kind != "Seq Scan" and "group_id" in cond for kind, _, cond in reads), reads
    assert not [n for n in nodes(tree) if n["Node Type"] == "Bitmap Heap Scan"], reads


@pytest.mark.parametrize("name", ["queue_stats", "message_purge", "move_task_backlog"])
def test_whole_queue_statements_read_only_that_queue(loaded: Conn, plan: PlanOf, name: str) -> None:
    # Both indexes of messages by queue are partial (standard and FIFO): `queue_id = $1` alone
    # matched neither, and the stats, a purge or a move task's start of any queue read the whole
    # table.
    tree = plan(loaded, name, {"queue_id": 2, "queue_name": "s", "now": None})
    reads = index_reads(tree)
    assert reads and all(kind != "Seq Scan" and "queue_id" in cond for kind, _, cond in reads), reads
    assert {index for _, index, _ in reads} == {"messages_standard_due_idx", "messages_group_order_idx"}, reads


def test_no_hot_statement_scans_a_hot_table_on_a_small_load(small_load: Conn, plan: PlanOf) -> None:
    # What grows with the backlog is a sequential scan; on a small load an index of the FIFO
    # queue may be walked instead of the primary key, which stays cheap (and a later ANALYZE of
    # the grown table plans again).
    entries = json.dumps([{"message_id": str(uuid.uuid4()), "body": 1, "dedup_id": "d-1", "scope_key": ""}])
    checks: list[tuple[str, dict[str, Any]]] = [
        (
            "message_receive_standard",
            {"queue_id": 2, "limit": 10, "visibility_timeout": 30, "max_receive_count": None, "now": None},
        ),
        ("group_lock_for_messages", {"queue_id": 1, "ids": [1, 2, 3]}),
        (
            "message_nack",
            {"queue_id": 1, "ids": [1], "lease_ids": [uuid.uuid4()], "delays": [0], "errors": [None], "now": None},
        ),
        ("group_lock_for_send", {"queue_id": 1, "group_ids": ["g1", "new"], "delays": [0, 0], "now": None}),
        (SEND, {"lock_class": 1, "queue_id": 2, "entries": entries, "dedup_window": 300, "now": None}),
        ("redrive_pick_standard", {"queue_id": 2, "limit": 500, "now": None, "before_id": None, **ANY_SUBSET}),
        ("group_extend", {"queue_id": 1, "group_ids": ["g1", "g2"]}),
        ("queue_stats", {"queue_id": 2, "now": None}),
        ("message_purge", {"queue_id": 2, "queue_name": "s", "now": None}),
    ]
    for name, params in checks:
        tree = plan(small_load, name, params)
        scanned = [n.get("Relation Name") for n in nodes(tree) if n["Node Type"] == "Seq Scan"]
        assert not set(scanned) & {*HOT_TABLES, "message_dedup"}, (name, scanned)
    # And the receive walks the due index, as on a large load.
    assert_index_only(plan(small_load, *checks[0]), "messages_standard_due_idx")


VARIANTS = sorted(query.name for query in QUERIES.values() if query.base is not None)


@pytest.mark.parametrize("name", VARIANTS)
def test_every_variant_reads_no_hot_table_by_scan(loaded: Conn, plan: PlanOf, name: str) -> None:
    # Each statement composed of blocks (app.db.sql), planned as it runs: a send's JSON entries
    # (behind the fence or not), a backfill's staged ones (in the transaction that staged them).
    entries = json.dumps([{"message_id": str(uuid.uuid4()), "body": 1, "dedup_id": "d-1", "scope_key": ""}])
    params = {"lock_class": 1, "queue_id": 2, "entries": entries, "dedup_window": 300, "now": None}
    with loaded.transaction():
        loaded.execute(QUERIES["message_stage_create"].text)  # type: ignore[arg-type]
        loaded.execute(
            "INSERT INTO pg_temp.pqs_staged_entry VALUES (0, gen_random_uuid(), 'g1', 'd-1', '', '1', '{}', 0, false)"
        )
        tree = plan(loaded, name, {key: value for key, value in params.items() if f"%({key})s" in statement(name)})
    scanned = [n.get("Relation Name") for n in nodes(tree) if n["Node Type"] == "Seq Scan"]
    assert not set(scanned) & {*HOT_TABLES, "message_dedup"}, (name, scanned)


@pytest.mark.parametrize(
    ("name", "index"),
    [("message_peek_standard", "messages_standard_due_idx"), ("message_peek_fifo", "messages_group_order_idx")],
)
def test_a_peek_walks_its_queue_in_index_order(loaded: Conn, plan: PlanOf, name: str, index: str) -> None:
    # A look at the next messages stops after its limit, however many the queue holds: an index
    # read in the order shown, no sort of the queue's messages.
    tree = plan(loaded, name, {"queue_id": 1 if "fifo" in name else 2, "limit": 100})
    reads = index_reads(tree)
    assert [(kind, found) for kind, found, _ in reads if found.startswith("messages")] == [("Index Scan", index)], reads
    assert '"Sort"' not in json.dumps(tree), tree


# -- The dashboard's activity reads (docs/dashboard.md) -----------------------------------------


@pytest.fixture(scope="module")
def minutes_loaded_url(server_url: str, template_db: str) -> Iterator[str]:
    """`loaded`'s, and a day of minutes for 100 queues (144k rows), analysed."""
    minutes = (
        "INSERT INTO queue_minutes (queue_id, minute, sent, acked)"
        " SELECT q, date_trunc('minute', now()) - m * interval '1 minute', m, m"
        " FROM generate_series(1, 100) AS q, generate_series(0, 1439) AS m"
    )
    with loaded_database(server_url, template_db, BACKLOG, minutes, "ANALYZE queue_minutes") as url:
        yield url


@pytest.fixture
def minutes_loaded(minutes_loaded_url: str) -> Iterator[Conn]:
    with connected(minutes_loaded_url) as conn:
        yield conn


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("queue_minutes_range", {"queue_id": 7, "minutes": 60, "now": None}),
        ("queue_minutes_sample", {"queue_id": 7, "now": None, "visible": 1, "in_flight": 0, "delayed": 0,
                                  "oldest_age_seconds": 1.0}),
    ],
)  # fmt: skip
def test_a_queues_minutes_are_read_by_its_key(
    minutes_loaded: Conn, plan: PlanOf, name: str, params: dict[str, Any]
) -> None:
    # A chart reads one queue's last hour: at most 60 rows by the primary key, however many
    # queues and minutes are kept.
    tree = plan(minutes_loaded, name, params)
    reads = [n for n in nodes(tree) if n.get("Relation Name") == "queue_minutes"]
    assert all(n["Node Type"] != "Seq Scan" for n in reads), reads
    if name == "queue_minutes_range":
        # By the primary key, bounded by the queue and the range (not the queue's whole day).
        probes = [n for n in nodes(tree) if n.get("Index Name") == "queue_minutes_pkey"]
        assert len(probes) == 1 and len(reads) == 1, reads
        assert "queue_id" in probes[0]["Index Cond"] and "minute" in probes[0]["Index Cond"], probes


def test_the_minutes_prune_walks_the_minute_index(minutes_loaded: Conn, plan: PlanOf) -> None:
    tree = plan(minutes_loaded, "queue_minutes_prune", {"now": None, "limit": 1000})
    reads = [n for n in nodes(tree) if n.get("Relation Name") == "queue_minutes"]
    assert reads and all(n["Node Type"] != "Seq Scan" for n in reads), reads


def test_the_group_census_reads_only_its_queue(loaded: Conn, plan: PlanOf) -> None:
    # The leader's census reads every message of the queue once (that is its cost, spaced by the
    # metrics loop, as queue_stats'): through the group-order index, by queue; what is sorted is
    # the per-group rows (for the top 50s), not the messages.
    tree = plan(loaded, "group_census_take", {"queue_id": 1, "limit": 50, "now": None})
    reads = index_reads(tree)
    assert [index for _, index, _ in reads] == ["messages_group_order_idx"], reads
    assert reads[0][0] != "Seq Scan" and "queue_id" in reads[0][2], reads
    for sort in (n for n in nodes(tree) if n["Node Type"] == "Sort"):
        assert not [n for n in nodes(sort) if n.get("Relation Name") == "messages"], sort


def test_group_heads_and_leases_read_only_those_groups_and_leases(loaded: Conn, plan: PlanOf) -> None:
    # A head is one probe of the group-order index per group named; the leases read the index of
    # in-flight FIFO messages, whose size follows what receivers hold, not what the queue holds.
    heads = index_reads(plan(loaded, "group_heads", {"queue_id": 1, "group_ids": ["g1", "g2"], "now": None}))
    assert [(kind, index) for kind, index, _ in heads] == [("Index Scan", "messages_group_order_idx")], heads
    assert "group_id" in heads[0][2], heads
    leases = index_reads(plan(loaded, "group_in_flight", {"queue_id": 1, "limit": 10, "now": None}))
    assert [index for _, index, _ in leases] == ["messages_group_lease_idx"], leases
    assert "queue_id" in leases[0][2], leases


@pytest.fixture(scope="module")
def history_url(server_url: str, template_db: str) -> Iterator[str]:
    """`loaded`'s, and 100k history rows of the busy standard queue (id 2) with, every 1,000th,
    one of a quiet queue (id 3): the quiet queue's newest rows are far back from the table's end.
    Analysed."""
    rows = (
        "INSERT INTO message_history (queue_id, queue_name, message_id, sequence_number, group_id, sent_at,"
        " finished_at, receive_count, outcome)"
        " SELECT CASE WHEN i % 1000 = 0 THEN 3 ELSE 2 END, 'q', gen_random_uuid(), i,"
        " CASE WHEN i % 7 = 0 THEN 'g' || (i % 50) END, now(), now(), 1,"
        " (ARRAY['acked', 'acked', 'acked', 'dead_lettered', 'expired', 'purged'])[1 + i % 6]::history_outcome"
        " FROM generate_series(1, 100000) AS i"
    )
    with loaded_database(server_url, template_db, BACKLOG, rows, "ANALYZE message_history") as url:
        yield url


@pytest.fixture
def history(history_url: str) -> Iterator[Conn]:
    with connected(history_url) as conn:
        yield conn


@pytest.mark.parametrize("queue_id", [2, 3], ids=["busy", "quiet"])
@pytest.mark.parametrize(
    "filters",
    [
        {"outcome": None, "group_id": None, "before_id": None},
        {"outcome": "dead_lettered", "group_id": "g7", "before_id": 150_000},
    ],
    ids=["all", "filtered"],
)
def test_a_history_page_walks_its_queue_newest_first(
    history: Conn, plan: PlanOf, queue_id: int, filters: dict[str, Any]
) -> None:
    # A queue's recent history is its range of message_history_queue_idx read backwards, from
    # `before_id` down, stopping at the walk's bound: the filters test the rows it reaches. The
    # table's only other indexes (the primary key, a BRIN on finished_at) would read the whole
    # table back from its end, or sort it, to find a quiet queue's last rows.
    tree = plan(history, "history_page", {"queue_id": queue_id, "walk": 5_000, "limit": 21, **filters})
    reads = [n for n in nodes(tree) if n.get("Relation Name") == "message_history"]
    assert [(n["Node Type"], n.get("Index Name"), n.get("Scan Direction")) for n in reads] == [
        ("Index Scan", "message_history_queue_idx", "Backward")
    ], reads
    assert "queue_id >=" in reads[0]["Index Cond"] and "id <" in reads[0]["Index Cond"], reads[0]
    assert '"Sort"' not in json.dumps(tree), tree
    # The walk is bounded: a Limit of `walk` rows above the index read, below the filters.
    limits = [n for n in nodes(tree) if n["Node Type"] == "Limit"]
    assert len(limits) == 2, tree
