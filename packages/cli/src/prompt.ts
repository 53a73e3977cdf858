import { createInterface } from "node:readline";

/** One line from the terminal (input hidden when `hidden`), or the first line of piped stdin. */
export function ask(question: string, o: { hidden?: boolean } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const tty = Boolean(process.stdin.isTTY);
    const rl = createInterface({ input: process.stdin, output: tty ? process.stderr : undefined, terminal: tty });
    let answered = false;
    if (tty && o.hidden) {
      // Echo nothing after the question while the secret is typed.
      const w = rl as unknown as { _writeToOutput?: (s: string) => void };
      let asked = false;
      w._writeToOutput = (s: string) => {
        if (!asked) {
          process.stderr.write(s);
          asked = true;
        } else if (s.includes("\n") || s.includes("\r")) process.stderr.write("\n");
      };
    } else if (!tty) process.stderr.write(question);
    rl.question(tty ? question : "", (answer) => {
      answered = true;
      rl.close();
      resolve(answer.trim());
    });
    rl.on("close", () => {
      if (!answered) reject(new Error("No input (stdin closed)."));
    });
  });
}

/** y/N on a terminal. */
export async function confirm(question: string): Promise<boolean> {
  const a = await ask(`${question} [y/N] `);
  return /^y(es)?$/i.test(a);
}
