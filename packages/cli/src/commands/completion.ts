import type { Command } from "commander";
import { UsageError } from "../errors.js";

interface Node {
  name: string;
  subs: Node[];
  options: string[];
}

function tree(cmd: Command): Node {
  return {
    name: cmd.name(),
    subs: cmd.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden).map(tree),
    // Hidden flags (the global --api-key) are not offered, as --help does not show them.
    options: cmd.options.filter((o) => !o.hidden).flatMap((o) => [o.long, o.short].filter((x): x is string => Boolean(x))),
  };
}

function bash(root: Node): string {
  const cases: string[] = [];
  const walk = (n: Node, path: string[]) => {
    const words = [...n.subs.map((s) => s.name), ...n.options, ...root.options];
    cases.push(`    "${path.join(" ")}") words="${words.join(" ")}" ;;`);
    for (const s of n.subs) walk(s, [...path, s.name]);
  };
  walk(root, []);
  return `# bash completion for cardctl. Install: cardctl completion bash > /etc/bash_completion.d/cardctl
# or: echo 'source <(cardctl completion bash)' >> ~/.bashrc
_cardctl() {
  local cur path word i
  cur="\${COMP_WORDS[COMP_CWORD]}"
  path=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    [[ "$word" == -* ]] && continue
    case "\${path:+$path }$word" in
${[...new Set(cases.map((c) => c.match(/"([^"]*)"/)![1]!))].filter(Boolean).map((p) => `      "${p}") path="${p}" ;;`).join("\n")}
    esac
  done
  local words
  case "$path" in
${cases.join("\n")}
  esac
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
}
complete -F _cardctl cardctl
`;
}

function zsh(root: Node): string {
  const bashScript = bash(root);
  return `#compdef cardctl
# zsh completion for cardctl. Install: cardctl completion zsh > "\${fpath[1]}/_cardctl"
# or: echo 'source <(cardctl completion zsh)' >> ~/.zshrc
autoload -U +X bashcompinit && bashcompinit
${bashScript}`;
}

export function registerCompletion(program: Command): void {
  program
    .command("completion")
    .argument("<shell>", "bash or zsh")
    .description("Print a shell completion script")
    .action((shell: string) => {
      const root = tree(program);
      if (shell === "bash") process.stdout.write(bash(root));
      else if (shell === "zsh") process.stdout.write(zsh(root));
      else throw new UsageError(`Unsupported shell "${shell}": use bash or zsh.`);
    });
}
