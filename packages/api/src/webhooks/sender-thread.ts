import { parentPort, workerData } from "node:worker_threads";
import { WebhookSender, type WebhookMessage } from "./sender.js";

/** The worker thread of ThreadedWebhookSender: sends each message it is handed and answers its outcome. */
const sender = new WebhookSender(workerData as ConstructorParameters<typeof WebhookSender>[0]);
parentPort!.on("message", (m: { id: number; message: WebhookMessage } | "close") => {
  if (m === "close") return sender.close();
  sender.send(m.message).then(
    (outcome) => parentPort!.postMessage({ id: m.id, outcome }),
    (err: unknown) => parentPort!.postMessage({ id: m.id, error: err instanceof Error ? err.message : String(err) }),
  );
});
