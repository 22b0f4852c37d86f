// A worker written with openapi-fetch and the types openapi-typescript generates from
// openapi/openapi.json (tests/clients/test_generated_clients.py generates them, checks this with
// `tsc --strict` and runs it).
import createClient from "openapi-fetch";
import type { paths } from "./schema.js";

const { PQS_URL: baseUrl, PQS_KEY: key, PQS_QUEUE: queue = "" } = process.env;
const pqs = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${key}` } });
const at = (name: string) => ({ params: { path: { name } } });
const must = <T>(answer: { data?: T; error?: unknown }): T => {
  if (answer.data === undefined) throw new Error(JSON.stringify(answer.error));
  return answer.data;
};
const out: Record<string, unknown> = {};
out.created = [(await pqs.PUT("/v1/queues/{name}", at("plain"))).response.status]; // no body: defaults
must(await pqs.PUT("/v1/queues/{name}", { ...at("jobs-dlq.fifo"), body: { fifo: true } }));
const dead_letter = { queue: "jobs-dlq.fifo", max_receive_count: 3 };
out.dlq = must(await pqs.PUT("/v1/queues/{name}", { ...at(queue), body: { fifo: true, dead_letter } })).dead_letter?.queue;
const sent = must(await pqs.POST("/v1/queues/{name}/messages", { ...at(queue), body: { body: { n: 1 }, group_id: "a", dedup_id: "m1" } }));
out.duplicate = sent.duplicate;
const entries = ([[2, "a"], [3, "b"]] as const).map(([n, g]) => ({ id: `e${n}`, body: { n }, group_id: g, dedup_id: `m${n}` }));
out.batchFailed = must(await pqs.POST("/v1/queues/{name}/messages/batch", { ...at(queue), body: { entries } })).failed;
const receive = async () => must(await pqs.POST("/v1/queues/{name}/messages/receive", { ...at(queue), body: { max_messages: 10, wait_seconds: 5 } })).messages;
const got = await receive();
out.received = got.map((m) => `${m.group_id}:${(m.body as { n: number }).n}`);
const [one, two, three] = got.map((m) => m.receipt_handle);
out.failed = [
  ...must(await pqs.POST("/v1/queues/{name}/messages/ack", { ...at(queue), body: { entries: [{ id: "a", receipt_handle: one }] } })).failed,
  ...must(await pqs.POST("/v1/queues/{name}/messages/nack", { ...at(queue), body: { entries: [{ id: "n", receipt_handle: two, delay_seconds: 60 }] } })).failed,
  ...must(await pqs.POST("/v1/queues/{name}/messages/visibility", { ...at(queue), body: { entries: [{ id: "v", receipt_handle: three, visibility_timeout: 0 }] } })).failed,
];
out.again = (await receive()).map((m) => `${m.group_id}:${(m.body as { n: number }).n}`);
out.notFound = (await pqs.GET("/v1/queues/{name}", at("missing.fifo"))).error?.error.code; // typed: ErrorBody
const stranger = createClient<paths>({ baseUrl, headers: { Authorization: "Bearer pqs_nobody_secret" } });
out.unauthorized = (await stranger.GET("/v1/queues/{name}", at(queue))).error?.error.code;
console.log(JSON.stringify(out));
