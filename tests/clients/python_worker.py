"""A worker written with the client openapi-python-client generates from openapi/openapi.json, as a
user would write it (tests/clients/test_generated_clients.py generates the client and runs this)."""

import json
import os

from pqs_client import AuthenticatedClient
from pqs_client import models as m
from pqs_client.api.messages import (
    ack_messages,
    change_visibility,
    nack_messages,
    receive_messages,
    send_message,
    send_message_batch,
)
from pqs_client.api.queues import create_queue, get_queue

url, queue = os.environ["PQS_URL"], os.environ["PQS_QUEUE"]
pqs = AuthenticatedClient(base_url=url, token=os.environ["PQS_KEY"], raise_on_unexpected_status=True)
out: dict = {"created": [create_queue.sync_detailed("plain", client=pqs).status_code]}  # no body: defaults
create_queue.sync("jobs-dlq.fifo", client=pqs, body=m.QueueAttributesIn(fifo=True))
dead_letter = m.DeadLetterModel(queue="jobs-dlq.fifo", max_receive_count=3)
jobs = create_queue.sync(queue, client=pqs, body=m.QueueAttributesIn(fifo=True, dead_letter=dead_letter))
out["dlq"] = jobs.dead_letter.queue
sent = send_message.sync(queue, client=pqs, body=m.SendRequest(body={"n": 1}, group_id="a", dedup_id="m1"))
out["duplicate"] = sent.duplicate
entries = [m.SendBatchEntry(id=f"e{n}", body={"n": n}, group_id=g, dedup_id=f"m{n}") for n, g in ((2, "a"), (3, "b"))]
batch = send_message_batch.sync(queue, client=pqs, body=m.SendBatchRequest(entries=entries))
out["batchFailed"] = [f.to_dict() for f in batch.failed]
poll = m.ReceiveRequest(max_messages=10, wait_seconds=5)
got = receive_messages.sync(queue, client=pqs, body=poll).messages
out["received"] = [f"{g.group_id}:{g.body['n']}" for g in got]
one, two, three = (g.receipt_handle for g in got)
acked = ack_messages.sync(queue, client=pqs, body=m.AckRequest(entries=[m.AckEntry(id="a", receipt_handle=one)]))
nack = m.NackEntry(id="n", receipt_handle=two, delay_seconds=60)
nacked = nack_messages.sync(queue, client=pqs, body=m.NackRequest(entries=[nack]))
shown = m.VisibilityEntry(id="v", receipt_handle=three, visibility_timeout=0)
changed = change_visibility.sync(queue, client=pqs, body=m.VisibilityRequest(entries=[shown]))
out["failed"] = [f.to_dict() for f in (*acked.failed, *nacked.failed, *changed.failed)]
out["again"] = [f"{g.group_id}:{g.body['n']}" for g in receive_messages.sync(queue, client=pqs, body=poll).messages]
out["notFound"] = get_queue.sync("missing.fifo", client=pqs).error.code  # typed: an ErrorBody
stranger = AuthenticatedClient(base_url=url, token="pqs_nobody_secret", raise_on_unexpected_status=True)
out["unauthorized"] = get_queue.sync(queue, client=stranger).error.code
print(json.dumps(out))
