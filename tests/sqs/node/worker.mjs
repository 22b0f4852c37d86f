// A worker of a FIFO queue, written against PQS's SQS endpoint with the AWS SDK for JavaScript
// v3 as against SQS: only the endpoint differs. Credentials and region come from the SDK's usual
// environment variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION). It prints a JSON
// summary of what it sent and received (tests/sqs/test_node_worker.py asserts on it). The SDK
// checks MD5OfMessageBody and MD5OfBody of every answer and throws on a mismatch.
import {
  SQSClient, GetQueueUrlCommand, CreateQueueCommand, QueueDoesNotExist, SendMessageCommand,
  SendMessageBatchCommand, ReceiveMessageCommand, ChangeMessageVisibilityCommand,
  DeleteMessageCommand, DeleteMessageBatchCommand,
} from "@aws-sdk/client-sqs";

const sqs = new SQSClient({ endpoint: process.env.PQS_ENDPOINT });
const name = process.env.PQS_QUEUE ?? "orders.fifo";
const run = process.env.PQS_RUN ?? "1";

async function queueUrl() {
  // Workers resolve their queue's URL first; only a worker allowed to create it does so.
  try {
    return (await sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl;
  } catch (error) {
    if (!(error instanceof QueueDoesNotExist)) throw error;
    const Attributes = { FifoQueue: "true", ContentBasedDeduplication: "true" };
    return (await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes }))).QueueUrl;
  }
}

const QueueUrl = await queueUrl();
const body = (group, n) => `run ${run}: ${group}-${n} ✓`;
await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: body("a", 1), MessageGroupId: "a" }));
const batch = await sqs.send(new SendMessageBatchCommand({
  QueueUrl,
  Entries: [["b", 1], ["a", 2], ["b", 2], ["a", 3]].map(([group, n], i) => (
    { Id: `m${i}`, MessageBody: body(group, n), MessageGroupId: group })),
}));

const received = [];
const sent = 1 + (batch.Successful ?? []).length;
while (received.length < sent) {
  const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({
    QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 5, MessageSystemAttributeNames: ["MessageGroupId"],
  }));
  if (Messages.length === 0) break;
  const [first, ...rest] = Messages;
  // More time for the first message, then done with all of them: one alone, the rest in a batch.
  await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl, ReceiptHandle: first.ReceiptHandle, VisibilityTimeout: 60 }));
  await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: first.ReceiptHandle }));
  if (rest.length > 0) {
    const done = await sqs.send(new DeleteMessageBatchCommand({
      QueueUrl, Entries: rest.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
    }));
    if ((done.Failed ?? []).length > 0) throw new Error(`delete failed: ${JSON.stringify(done.Failed)}`);
  }
  received.push(...Messages.map((m) => ({ group: m.Attributes.MessageGroupId, body: m.Body })));
}

// An empty queue now: a long poll waits its WaitTimeSeconds out before answering with nothing.
const started = Date.now();
const last = await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 1 }));
console.log(JSON.stringify({
  queueUrl: QueueUrl,
  sent,
  batchFailed: batch.Failed ?? [],
  received,
  emptyPoll: { messages: (last.Messages ?? []).length, waitedMs: Date.now() - started },
}));
