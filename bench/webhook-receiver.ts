import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The bench's webhook receivers, in a process of their own (so receiving does not take the load
 * generator's CPU): `/ok` answers 200 at once, `/hang` never answers (the worker's timeout ends each
 * attempt). Prints "receiver listening on <url>".
 */
let received = 0;
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    received++;
    if (!req.url?.startsWith("/hang")) res.writeHead(200).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`receiver listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`));
process.once("SIGINT", () => {
  process.stdout.write(`receiver got ${received} deliveries\n`);
  process.exit(0);
});
