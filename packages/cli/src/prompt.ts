import { createInterface } from "node:readline";
import { UsageError } from "./errors.js";

/**
 * One line from the terminal, or the first line of piped stdin. With `hidden` on a terminal, each
 * typed character echoes as `*` (as the Stripe CLI's login does): the secret is never shown, but
 * the person sees that the paste or the typing arrived.
 */
export function ask(question: string, o: { hidden?: boolean } = {}): Promise<string> {
  const tty = Boolean(process.stdin.isTTY);
  if (tty && o.hidden) return askMasked(question);
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: process.stdin, output: tty ? process.stderr : undefined, terminal: tty });
    let answered = false;
    if (!tty) process.stderr.write(question);
    rl.question(tty ? question : "", (answer) => {
      answered = true;
      rl.close();
      resolve(answer.trim());
    });
    // Ctrl-C at the prompt is a cancel (exit 2), as at the login prompt; not a failure to read.
    rl.on("SIGINT", () => {
      answered = true;
      rl.close();
      process.stderr.write("\n");
      reject(new UsageError("Cancelled (Ctrl-C)."));
    });
    rl.on("close", () => {
      if (!answered) reject(new UsageError("No input (stdin closed)."));
    });
  });
}

/** Raw-mode line editing for a secret: `*` per character, Backspace erases one, Ctrl-C/Ctrl-D abort. */
function askMasked(question: string): Promise<string> {
  const stdin = process.stdin;
  const out = process.stderr;
  return new Promise((resolve, reject) => {
    let value = "";
    const wasRaw = stdin.isRaw;
    const finish = (err?: Error) => {
      stdin.off("data", onData);
      stdin.setRawMode(wasRaw);
      stdin.pause();
      out.write("\n");
      if (err) reject(err);
      else resolve(value.trim());
    };
    const onData = (chunk: Buffer | string) => {
      // Escape sequences (arrow keys, bracketed-paste markers) are not part of a key.
      const text = String(chunk).replace(/\x1b\[[0-9;?]*[A-Za-z~]/g, "");
      for (const ch of text) {
        if (ch === "\r" || ch === "\n") return finish();
        if (ch === "\x03") return finish(new UsageError("Cancelled (Ctrl-C)."));
        if (ch === "\x04") {
          if (value === "") return finish(new UsageError("No input (stdin closed)."));
          return finish();
        }
        if (ch === "\x7f" || ch === "\b") {
          if (value.length > 0) {
            value = value.slice(0, -1);
            out.write("\b \b");
          }
          continue;
        }
        if (ch === "\x15") {
          // Ctrl-U: erase the whole entry
          out.write("\b \b".repeat(value.length));
          value = "";
          continue;
        }
        if (ch < " " || ch === "\x1b") continue;
        value += ch;
        out.write("*");
      }
    };
    // Raw mode (no echo by the terminal) before the question, so nothing typed after it shows.
    stdin.setEncoding("utf8");
    stdin.setRawMode(true);
    out.write(question);
    stdin.resume();
    stdin.on("data", onData);
  });
}

/** y/N on a terminal. */
async function confirm(question: string): Promise<boolean> {
  const a = await ask(`${question} [y/N] `);
  return /^y(es)?$/i.test(a);
}

/**
 * Before something that cannot be undone: asks on a terminal; elsewhere (a script, a pipe) refuses
 * unless --yes was given, so nothing is destroyed by a command that nobody watched.
 */
export async function confirmOrRefuse(yes: boolean | undefined, o: { what: string; question: string; aborted: string }): Promise<void> {
  if (yes) return;
  if (!process.stdin.isTTY || !process.stdout.isTTY) throw new UsageError(`Refusing to ${o.what} without confirmation: not a terminal. Pass --yes.`);
  if (!(await confirm(o.question))) throw new UsageError(o.aborted);
}
