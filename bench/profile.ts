/**
 * Summarises a V8 .cpuprofile (from `BENCH_CPU_PROF=<dir> npm run bench`, which runs the server
 * with --cpu-prof): self time by package and by function, and inclusive time of the functions
 * that matter. Usage: tsx bench/profile.ts <file.cpuprofile> [top=25] [filter]
 */
import { readFileSync } from "node:fs";

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

const [file, topArg, filter] = process.argv.slice(2);
if (!file) throw new Error("usage: tsx bench/profile.ts <file.cpuprofile> [top] [filter]");
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, "utf8")) as { nodes: Node[] };
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const total = profile.nodes.reduce((s, n) => s + (n.hitCount ?? 0), 0);

const pkg = (url: string) => {
  if (!url) return "(native/vm)";
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith("node:")) return "node:" + url.slice(5).split("/")[0];
  const w = /\/work\/main\/((?:apps|packages)\/[^/]+)/.exec(url);
  return w ? w[1]! : url;
};
const fn = (n: Node) => `${n.callFrame.functionName || "(anonymous)"} ${pkg(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;

const selfBy = (key: (n: Node) => string) => {
  const m = new Map<string, number>();
  for (const n of profile.nodes) m.set(key(n), (m.get(key(n)) ?? 0) + (n.hitCount ?? 0));
  return [...m].sort((a, b) => b[1] - a[1]);
};

// Inclusive: each function counted once per stack (recursion is not double counted).
const inclusive = new Map<string, number>();
const walk = (id: number, onStack: Set<string>) => {
  const n = byId.get(id)!;
  const k = fn(n);
  const fresh = !onStack.has(k);
  if (fresh) onStack.add(k);
  let sub = n.hitCount ?? 0;
  for (const c of n.children ?? []) sub += walk(c, onStack);
  if (fresh) {
    inclusive.set(k, (inclusive.get(k) ?? 0) + sub);
    onStack.delete(k);
  }
  return sub;
};
walk(profile.nodes[0]!.id, new Set());

const pct = (v: number) => `${((v / total) * 100).toFixed(1).padStart(5)}%`;
console.log(`samples: ${total}\n\nself time by package:`);
for (const [k, v] of selfBy((n) => pkg(n.callFrame.url)).slice(0, top)) console.log(`  ${pct(v)}  ${k}`);
console.log(`\nself time by function:`);
for (const [k, v] of selfBy(fn).slice(0, top)) console.log(`  ${pct(v)}  ${k}`);
console.log(`\ninclusive time${filter ? ` (matching '${filter}')` : ""}:`);
for (const [k, v] of [...inclusive].filter(([k]) => !filter || k.includes(filter)).sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`  ${pct(v)}  ${k}`);
