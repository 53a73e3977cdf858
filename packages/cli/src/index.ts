import { Command, CommanderError, Option } from "commander";
import { registerAccount } from "./commands/account.js";
import { registerAuth } from "./commands/auth.js";
import { registerCards } from "./commands/cards.js";
import { registerCompletion } from "./commands/completion.js";
import { registerEvents } from "./commands/events.js";
import { registerListen } from "./commands/listen.js";
import { registerOperator } from "./commands/operator.js";
import { registerWatch } from "./commands/watch.js";
import { registerWebhooks } from "./commands/webhooks.js";
import { resolve } from "./config.js";
import { VERSION, current } from "./context.js";
import { EXIT } from "./errors.js";
import { Output } from "./output.js";
import { reportError } from "./report.js";

export function buildProgram(): Command {
  const program = new Command("cardctl");
  program
    .description("Single-use virtual cards for AI agents: approve requests, watch spend, manage keys.")
    .version(VERSION, "-v, --version")
    .option("--json", "print the API's JSON instead of tables")
    .option("--profile <name>", "config profile to use (default: the current profile, or CARDCTL_PROFILE)")
    .option("--base-url <url>", "server URL; overrides CARDCTL_BASE_URL and the profile")
    .addOption(new Option("--api-key <key>", "API key; overrides CARDCTL_API_KEY and the profile").hideHelp())
    .option("--admin-token <token>", "operator token for accounts/keys commands (or CARDCTL_ADMIN_TOKEN)")
    .option("--no-color", "disable colours (also NO_COLOR=1, or when stdout is not a terminal)")
    // Subcommands' --help lists these too, as gh and the Stripe CLI do (inherited by every subcommand).
    .configureHelp({ showGlobalOptions: true })
    .showHelpAfterError("(run with --help for usage)")
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({
      outputError: (str, write) => write(str),
    })
    .addHelpText(
      "after",
      `
Configuration: ~/.config/cardctl/config.json (XDG_CONFIG_HOME or CARDCTL_CONFIG_DIR move it), mode 0600.
Precedence: --api-key/--base-url > CARDCTL_API_KEY/CARDCTL_BASE_URL > the profile (--profile NAME).
Exit codes: 0 success, 1 API error, 2 usage error, 3 authentication error.`,
    );
  registerAuth(program);
  registerCards(program);
  registerAccount(program);
  const approvals = program.commands.find((c) => c.name() === "approvals")!;
  registerWatch(approvals);
  registerEvents(program);
  registerListen(program);
  registerWebhooks(program);
  registerOperator(program);
  registerCompletion(program);
  return program;
}

export async function main(argv = process.argv): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === "number" ? process.exitCode : EXIT.OK;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help asked for is success; help shown because a command was missing (commander.help) is a usage error.
      if (err.code === "commander.helpDisplayed" || err.code === "commander.version") return EXIT.OK;
      // commander.executeSubCommandAsync etc.: usage problems (unknown option, missing argument, …)
      if (err.exitCode === 0) return EXIT.OK;
      // Commander told stderr; a script reading --json gets the error envelope on stdout, as for our own usage errors.
      if (argv.includes("--json") && err.code !== "commander.help")
        new Output({ json: true }).printJson({ error: { code: "usage_error", message: err.message.replace(/^error: /, "") } });
      return EXIT.USAGE;
    }
    const opts = (current?.opts ?? program.opts()) as { json?: boolean; color?: boolean };
    let baseUrl: string | undefined = current?.resolved.baseUrl;
    if (!baseUrl) {
      try {
        baseUrl = resolve(opts).baseUrl;
      } catch {
        baseUrl = undefined;
      }
    }
    return reportError(err, current?.out ?? new Output(opts), { baseUrl, dollarFlags: current?.dollarFlags, centsTyped: current?.centsTyped, flagNames: current?.flagNames, retryWith: current?.retryWith });
  }
}
