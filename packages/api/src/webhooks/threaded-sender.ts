import { Worker } from "node:worker_threads";
import type { SendOutcome, SendWebhook, WebhookMessage, WebhookSender } from "./sender.js";

type Options = ConstructorParameters<typeof WebhookSender>[0];
const TSX_BOOTSTRAP = `
const { workerData } = require("node:worker_threads");
import(workerData.tsx).then(({ register }) => { register(); return import(workerData.entry); });
`;

/**
 * The thread holds at most a few dozen requests: its old generation is capped. Its young
 * generation is left at V8's size: capped at 2 MB, scavenges took enough of the thread's CPU, on
 * cores it shares with the API, to cut creates with three endpoints to 67-76% of none (84-94% without).
 */
const HEAP = { maxOldGenerationSizeMb: 64 };

/** The outcome of a message handed over after close(). */
const CLOSED: SendOutcome = { ok: false, status: null, error: "not sent: the sender is closed" };

type Reply = { id: number; outcome: SendOutcome } | { id: number; error: string };
/** What crosses the thread boundary: the messages (or outcomes) of one turn of the event loop, together. */
export type ToThread = { id: number; message: WebhookMessage }[] | "close";
export type FromThread = Reply[];

/**
 * A WebhookSender on a worker thread of its own. Sending is HTTP client work (a request, its
 * signature, the answer's parsing): about 200 µs of CPU per delivery, so with two receivers it was
 * more CPU than the card creation that produced the event, on the thread that serves the API.
 * The claims and outcomes stay in the delivery queue on the main thread; only the messages and
 * their outcomes cross. From TypeScript sources (tsx,
 * tests) it loads the thread's .ts module through tsx's API; the built server has it as its own
 * file (apps/server/tsup.config.ts).
 */
export class ThreadedWebhookSender {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, { resolve(o: SendOutcome): void; reject(e: Error): void }>();
  private next = 0;
  private closed = false;
  /** Messages of this turn, posted together at its end: one wake-up of the thread per claim, not per delivery. */
  private outbox: { id: number; message: WebhookMessage }[] = [];

  constructor(private readonly opts: Options) {}

  readonly send: SendWebhook = (message) =>
    new Promise<SendOutcome>((resolve, reject) => {
      if (this.closed) return resolve(CLOSED);
      const id = this.next++;
      this.pending.set(id, { resolve, reject });
      if (this.outbox.push({ id, message }) === 1) setImmediate(() => this.flush());
    });

  private flush(): void {
    const batch = this.outbox;
    this.outbox = [];
    if (this.closed) for (const { id } of batch) this.settle({ id, outcome: CLOSED });
    else this.thread().postMessage(batch satisfies ToThread);
  }

  private settle(reply: Reply): void {
    const waiting = this.pending.get(reply.id);
    this.pending.delete(reply.id);
    if ("outcome" in reply) waiting?.resolve(reply.outcome);
    else waiting?.reject(new Error(reply.error));
  }

  /** Starts the thread ahead of the first message (loading it takes a moment, longer from TypeScript). */
  start(): void {
    if (!this.closed) this.thread();
  }

  /** Ends the thread's connections: attempts in flight fail (and are answered), then the thread exits. */
  close(): void {
    this.closed = true;
    this.flush();
    this.worker?.postMessage("close" satisfies ToThread);
    this.exitWhenIdle();
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const worker = import.meta.url.endsWith(".ts")
      ? // A thread does not inherit the TypeScript loader: it registers tsx first.
        new Worker(TSX_BOOTSTRAP, {
          eval: true,
          workerData: { ...this.opts, tsx: import.meta.resolve("tsx/esm/api"), entry: new URL("./sender-thread.ts", import.meta.url).href },
          resourceLimits: HEAP,
        })
      : new Worker(new URL("./sender-thread.js", import.meta.url), { workerData: this.opts, resourceLimits: HEAP });
    worker.on("message", (replies: FromThread) => {
      for (const reply of replies) this.settle(reply);
      this.exitWhenIdle();
    });
    // A thread that died fails what it held; the next message starts a new one.
    worker.on("error", (err) => this.failAll(err));
    worker.on("exit", () => {
      if (this.worker === worker) this.worker = undefined;
      this.failAll(new Error("the webhook sender thread exited"));
    });
    worker.unref();
    return (this.worker = worker);
  }

  private failAll(err: Error): void {
    for (const waiting of this.pending.values()) waiting.reject(err);
    this.pending.clear();
  }

  private exitWhenIdle(): void {
    if (this.closed && this.pending.size === 0) void this.worker?.terminate();
  }
}
