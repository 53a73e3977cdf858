/**
 * `npm run bench:wal`: what a card creation writes to SQLite, page by page. A build of the server
 * (`npm start`'s way, on a fresh SQLite file) takes creates as `npm run bench:ab` sends them; a
 * reader holds a snapshot meanwhile, so no checkpoint completes and the WAL is never restarted; the
 * server is then killed and every frame the run appended to the WAL is read back and attributed to
 * the table or index owning its page (SQLite's dbstat). Unlike CPU time on a shared host, these
 * counts barely move between runs: the measure for a change to what a create writes.
 *
 *   npm run bench:wal -- [dist folder=apps/server/dist] [seconds=3] [connections=10]
 *
 * Prints frames and commits per card, then frames per card by B-tree (interior pages apart).
 */
import { copyFileSync, readFileSync } from "node:fs";
import autocannon from "autocannon";
import Database from "better-sqlite3";
import { createCardRequest, startFresh } from "./processes.js";

const [dist = "apps/server/dist", seconds = "3", connections = "10"] = process.argv.slice(2);
const server = await startFresh(dist);
const holder = new Database(server.file);
holder.exec("BEGIN");
holder.prepare("SELECT COUNT(*) FROM cards").get();
const walBefore = readFileSync(`${server.file}-wal`).length;
const cardsBefore = (holder.prepare("SELECT COUNT(*) AS n FROM cards").get() as { n: number }).n;

let sent = 0;
const res = await autocannon({
  url: server.url,
  connections: Number(connections),
  duration: Number(seconds),
  requests: [{ setupRequest: (req: object) => ({ ...req, ...createCardRequest(server.key, sent++) }) }],
});
server.child.kill("SIGKILL");
await new Promise((done) => server.child.once("exit", done));

// The WAL: a 32-byte header, then frames of a 24-byte header (page number, database size after a
// commit or 0, the header's salts) and the page. Frames of this run start where the file ended.
const wal = readFileSync(`${server.file}-wal`);
const pageSize = wal.readUInt32BE(8);
const frameSize = 24 + pageSize;
const salts = [wal.readUInt32BE(16), wal.readUInt32BE(20)];
const pages: number[] = [];
let commits = 0;
for (let off = 32 + Math.round((walBefore - 32) / frameSize) * frameSize; off + frameSize <= wal.length; off += frameSize) {
  if (wal.readUInt32BE(off + 8) !== salts[0] || wal.readUInt32BE(off + 12) !== salts[1]) break;
  pages.push(wal.readUInt32BE(off));
  if (wal.readUInt32BE(off + 4) !== 0) commits++;
}
// Page owners in the database as the run left it: a copy, taken before the holder's close would
// checkpoint the WAL away (opening the copy recovers it).
for (const ext of ["", "-wal"]) copyFileSync(`${server.file}${ext}`, `${server.file}.copy${ext}`);
holder.close();
const db = new Database(`${server.file}.copy`);
const owner = new Map<number, string>();
for (const row of db.prepare("SELECT name, pageno, pagetype FROM dbstat").all() as { name: string; pageno: number; pagetype: string }[])
  owner.set(row.pageno, row.pagetype === "leaf" ? row.name : `${row.name} (${row.pagetype})`);
const cards = (db.prepare("SELECT COUNT(*) AS n FROM cards").get() as { n: number }).n - cardsBefore;
db.close();

const byOwner = new Map<string, number>();
for (const page of pages) {
  const name = page === 1 ? "page 1 (database header)" : (owner.get(page) ?? "(freed since)");
  byOwner.set(name, (byOwner.get(name) ?? 0) + 1);
}
const perCard = (n: number) => (n / cards).toFixed(2);
console.log(`${dist}: ${res["2xx"]} creates answered, ${cards} cards written; per card ${perCard(pages.length)} WAL frames, ${perCard(commits)} commits`);
for (const [name, n] of [...byOwner].sort((a, b) => b[1] - a[1])) console.log(`${perCard(n).padStart(8)}  ${name}`);
