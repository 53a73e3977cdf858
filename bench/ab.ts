/**
 * `npm run bench:ab`: two (or more) builds of the server, side by side, loaded in turn: what a change
 * buys, measured on a shared host whose speed drifts by ±30% within minutes. Each build serves its
 * own fresh SQLite file (the demo account of a first start); the rounds alternate the builds in ABBA
 * order, and the verdict is each build's median server CPU per request and, against the first
 * build, the median of the per-round differences and how many rounds the other build was cheaper.
 *
 *   cp -r apps/server/dist apps/server/dist-before   # before the change (beside node_modules)
 *   …change, then npm run build…
 *   npm run bench:ab -- create 1 40 apps/server/dist-before apps/server/dist
 *
 * Cases: `create` (POST /v1/cards, each with its own Idempotency-Key, as `npm run bench` sends
 * them), `balance` (GET /v1/balance), `auth` (the simulated processor's authorization helper,
 * cycling over 2,000 cards: the first decision on a card approves it, the rest decline), `events`
 * (GET /v1/events?limit=20, after those 2,000 cards' creation events), `list` (GET
 * /v1/cards?limit=20 over those 2,000 cards).
 * Arguments: case, seconds per round, rounds, the builds' dist folders.
 */
import autocannon from "autocannon";
import { apiHeaders, cpuMs, createCardRequest, startFresh, type FreshServer } from "./processes.js";

const [kind, seconds, rounds, ...builds] = process.argv.slice(2);
if (!["create", "balance", "auth", "events", "list"].includes(kind ?? "") || !(Number(seconds) > 0) || !(Number(rounds) > 0) || builds.length < 2) {
  console.error("usage: npm run bench:ab -- <create|balance|auth|events|list> <seconds per round> <rounds> <dist folder> <dist folder>…");
  process.exit(2);
}

interface Server extends FreshServer {
  cards: string[];
}

const start = async (dist: string): Promise<Server> => ({ ...(await startFresh(dist)), cards: [] });

const headers = (s: Server) => apiHeaders(s.key);

/** Cards for the `auth` case to decide on (and their events for `events`, the page for `list`). */
async function makeCards(s: Server): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    const res = await fetch(`${s.url}/v1/cards`, { method: "POST", headers: headers(s), body: JSON.stringify({ amount_cents: 5000 }) });
    s.cards.push(((await res.json()) as { id: string }).id);
  }
}

/** What autocannon reports that this driver reads. */
type Outcome = { "2xx": number; non2xx: number; errors: number };

let sent = 0;
function load(s: Server, duration: number): Promise<Outcome> {
  const request = (): { method: "GET" | "POST"; path: string; body?: string; headers: Record<string, string> } => {
    if (kind === "balance") return { method: "GET", path: "/v1/balance", headers: headers(s) };
    if (kind === "events") return { method: "GET", path: "/v1/events?limit=20", headers: headers(s) };
    if (kind === "list") return { method: "GET", path: "/v1/cards?limit=20", headers: headers(s) };
    if (kind === "auth")
      return { method: "POST", path: `/v1/test_helpers/cards/${s.cards[sent++ % s.cards.length]}/authorizations`, body: '{"amount_cents":100}', headers: headers(s) };
    return createCardRequest(s.key, sent++);
  };
  return autocannon({ url: s.url, connections: 10, duration, requests: [{ setupRequest: (req: object) => ({ ...req, ...request() }) }] });
}

const servers: Server[] = [];
for (const dist of builds) servers.push(await start(dist));
if (kind === "auth" || kind === "events" || kind === "list") for (const s of servers) await makeCards(s);
for (const s of servers) await load(s, 2);

const cpuPerRequest: number[][] = builds.map(() => []);
for (let r = 0; r < Number(rounds); r++) {
  const order = [...builds.keys()];
  for (const i of r % 2 ? order.reverse() : order) {
    const s = servers[i]!;
    const before = cpuMs(s.child.pid!);
    const res = await load(s, Number(seconds));
    const ok = res["2xx"];
    cpuPerRequest[i]!.push(((cpuMs(s.child.pid!) - before) * 1000) / ok);
    if (res.non2xx || res.errors) console.log(`${builds[i]}: round ${r + 1}: ${res.non2xx} non-2xx, ${res.errors} errors`);
  }
}
for (const s of servers) await s.stop();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [i, dist] of builds.entries()) {
  const own = cpuPerRequest[i]!;
  const diffs = own.map((us, r) => cpuPerRequest[0]![r]! - us);
  const against =
    i === 0 ? "" : `; the first build's minus this one's, per round: median ${median(diffs).toFixed(0)} µs, this one cheaper in ${diffs.filter((d) => d > 0).length} of ${diffs.length} rounds`;
  console.log(`${dist}: server CPU ${median(own).toFixed(0)} µs/request (median of ${own.length} rounds)${against}`);
}
