// Adds up every vitest JSON report of this run into one closing line: "Tests: N passed, N failed".
import { readdirSync, readFileSync } from "node:fs";

let passed = 0, failed = 0, skipped = 0;
const dir = ".test-results";
for (const f of readdirSync(dir).filter((f) => f.endsWith(".json"))) {
  const r = JSON.parse(readFileSync(`${dir}/${f}`, "utf8"));
  passed += r.numPassedTests;
  failed += r.numFailedTests;
  skipped += r.numPendingTests + (r.numTodoTests ?? 0);
  console.log(`${f}: ${r.numPassedTests} passed, ${r.numFailedTests} failed`);
}
console.log(`Tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
if (failed > 0 || passed === 0) process.exit(1);
