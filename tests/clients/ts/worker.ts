// A worker written with openapi-fetch and the types openapi-typescript generates from
// openapi/openapi.json (tests/clients/test_generated_clients.py generates them, checks this with
// `tsc --strict` and runs it).
import createClient from "openapi-fetch";
import type { paths } from "./schema.js";

const { PQS_URL: baseUrl, PQS_KEY: key, PQS_QUEUE: queue = "" } = process.env;
const pqs = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${key}` } });
const at = (name: string) => ({ params: { path: { name } } });
const q = at(queue);
const must = <T>(answer: { data?: T; error?: unknown }): T => {
  if (answer.data === undefined) throw new Error(JSON.stringify(answer.error));
  return answer.data;
};
const out: Record<string, unknown> = {};
out.created = [(await pqs.PUT("/v1/queues/{name}", at("plain"))).response.status]; // no body: defaults
must(await pqs.PUT("/v1/queues/{name}", { ...at("jobs-dlq.fifo"), body: { fifo: true } }));
const dead_letter = { queue: "jobs-dlq.fifo", max_receive_count: 3 };
out.dlq = must(await pqs.PUT("/v1/queues/{name}", { ...q, body: { fifo: true, dead_letter } })).dead_letter?.queue;
const message = { body: { n: 1 }, group_id: "a", dedup_id: "m1" };
out.duplicate = must(await pqs.POST("/v1/queues/{name}/messages", { ...q, body: message })).duplicate;
const entries = ([[2, "a"], [3, "b"]] as const).map(([n, g]) => ({ id: `e${n}`, body: { n }, group_id: g, dedup_id: `m${n}` }));
out.batchFailed = must(await pqs.POST("/v1/queues/{name}/messages/batch", { ...q, body: { entries } })).failed;
const poll = { ...q, body: { max_messages: 10, wait_seconds: 5 } };
const shown = (messages: { group_id: string | null; body: unknown }[]) =>
  messages.map((m) => `${m.group_id}:${(m.body as { n: number }).n}`);
const got = must(await pqs.POST("/v1/queues/{name}/messages/receive", poll)).messages;
out.received = shown(got);
const [one, two, three] = got.map((m) => m.receipt_handle);
const acked = await pqs.POST("/v1/queues/{name}/messages/ack", { ...q, body: { entries: [{ id: "a", receipt_handle: one }] } });
const nack = { id: "n", receipt_handle: two, delay_seconds: 60 };
const nacked = await pqs.POST("/v1/queues/{name}/messages/nack", { ...q, body: { entries: [nack] } });
const visible = { id: "v", receipt_handle: three, visibility_timeout: 0 };
const changed = await pqs.POST("/v1/queues/{name}/messages/visibility", { ...q, body: { entries: [visible] } });
out.failed = [acked, nacked, changed].flatMap((answer) => must(answer).failed);
out.again = shown(must(await pqs.POST("/v1/queues/{name}/messages/receive", poll)).messages);
out.notFound = (await pqs.GET("/v1/queues/{name}", at("missing.fifo"))).error?.error.code; // typed: ErrorBody
const stranger = createClient<paths>({ baseUrl, headers: { Authorization: "Bearer pqs_nobody_secret" } });
out.unauthorized = (await stranger.GET("/v1/queues/{name}", q)).error?.error.code;
console.log(JSON.stringify(out));
