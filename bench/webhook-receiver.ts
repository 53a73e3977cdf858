import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The bench's webhook receivers, in a process of their own (so receiving does not take the load
 * generator's CPU): `/ok…` answers 200 at once, `/hang…` never answers (the worker's timeout ends
 * each attempt), and `GET /count` answers how many deliveries each path has had so far (the worker
 * only POSTs). Prints "receiver listening on <url>".
 */
const received = new Map<string, number>();
const server = createServer((req, res) => {
  if (req.method === "GET" && req.url === "/count") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(Object.fromEntries(received)));
    return;
  }
  req.resume();
  req.on("end", () => {
    const path = req.url ?? "/";
    received.set(path, (received.get(path) ?? 0) + 1);
    if (!path.startsWith("/hang")) res.writeHead(200).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`receiver listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`));
process.once("SIGINT", () => {
  process.stdout.write(`receiver got ${[...received.values()].reduce((a, b) => a + b, 0)} deliveries\n`);
  process.exit(0);
});
