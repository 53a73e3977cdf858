import { connect } from "node:net";

export interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: any;
  /** From the first byte sent until the server closed the connection (or the answer was complete). */
  elapsedMs: number;
}

/**
 * Speaks HTTP/1.1 over a plain socket, for what fetch refuses to send: odd Host headers, stalled
 * or trickled bodies, oversized headers. `parts` are written in order, `gapMs` apart; the reply is
 * read until the server closes the connection or `waitMs` passes (then status is 0).
 */
export function rawHttp(url: string, parts: string[], o: { gapMs?: number; waitMs?: number } = {}): Promise<RawReply> {
  const { port, hostname } = new URL(url);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect(Number(port), hostname);
    let data = "";
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(parse(data, Date.now() - started));
    };
    socket.on("data", (d) => {
      data += d.toString();
      // A complete answer on a connection kept alive: done when its body is all there.
      const reply = parse(data, 0);
      if (reply.status && reply.headers["content-length"] !== undefined && Buffer.byteLength(data.slice(data.indexOf("\r\n\r\n") + 4)) >= Number(reply.headers["content-length"])) finish();
    });
    socket.on("close", finish);
    socket.on("error", (err) => ((err as NodeJS.ErrnoException).code === "ECONNRESET" ? finish() : reject(err)));
    timer = setTimeout(finish, o.waitMs ?? 10_000);
    socket.on("connect", async () => {
      for (const [i, part] of parts.entries()) {
        if (i > 0 && o.gapMs) await new Promise((r) => setTimeout(r, o.gapMs));
        if (socket.destroyed) return;
        socket.write(part);
      }
    });
  });
}

function parse(data: string, elapsedMs: number): RawReply {
  const end = data.indexOf("\r\n\r\n");
  if (!data.startsWith("HTTP/1.1 ") || end < 0) return { status: 0, headers: {}, body: undefined, elapsedMs };
  const [statusLine, ...lines] = data.slice(0, end).split("\r\n");
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  const text = data.slice(end + 4);
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: Number(statusLine!.split(" ")[1]), headers, body, elapsedMs };
}
