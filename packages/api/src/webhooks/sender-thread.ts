import { parentPort, workerData } from "node:worker_threads";
import { WebhookSender } from "./sender.js";
import type { FromThread, ToThread } from "./threaded-sender.js";

/**
 * The worker thread of ThreadedWebhookSender: sends each message it is handed and answers its
 * outcome; the outcomes of one turn of its event loop go back together.
 */
const sender = new WebhookSender(workerData as ConstructorParameters<typeof WebhookSender>[0]);
let replies: FromThread = [];
const answer = (reply: FromThread[number]) => {
  if (replies.push(reply) === 1)
    setImmediate(() => {
      parentPort!.postMessage(replies);
      replies = [];
    });
};
parentPort!.on("message", (batch: ToThread) => {
  if (batch === "close") return sender.close();
  for (const { id, message } of batch)
    sender.send(message).then(
      (outcome) => answer({ id, outcome }),
      (err: unknown) => answer({ id, error: err instanceof Error ? err.message : String(err) }),
    );
});
