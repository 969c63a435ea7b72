import type { Command } from 'commander';
import { BadInputError } from '../exit-codes';

/** Each command path (`fleet status`) with the words that may follow it: subcommands and options. */
export function completionWords(root: Command): Map<string, string[]> {
  const words = new Map<string, string[]>();
  const walk = (cmd: Command, path: string[]) => {
    const subcommands = cmd.commands.map((c) => c.name()).filter((n) => n !== 'help');
    const options = cmd.options.flatMap((o) => [o.long, o.short].filter((f): f is string => Boolean(f)));
    words.set(path.join(' '), [...subcommands, ...options, '--help']);
    for (const c of cmd.commands) if (c.name() !== 'help') walk(c, [...path, c.name()]);
  };
  walk(root, []);
  return words;
}

/**
 * A bash completion script (zsh loads it through `bashcompinit`): the words before the cursor that are not
 * options name the command path; its subcommands and options are offered.
 */
export function bashCompletion(root: Command): string {
  const cases = [...completionWords(root)]
    .map(([path, words]) => `      ${JSON.stringify(path)}) words=${JSON.stringify(words.join(' '))}; break ;;`)
    .join('\n');
  // Positional arguments (a fleet's name) are not command words: drop trailing words until a path matches.
  return `# haru shell completion: eval "$(haru completion bash)"
_haru_complete() {
  local path="" word words=""
  for word in "\${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
    case "$word" in -*) ;; *) path="\${path:+$path }$word" ;; esac
  done
  while :; do
    case "$path" in
${cases}
    esac
    [ -z "$path" ] && break
    case "$path" in *" "*) path="\${path% *}" ;; *) path="" ;; esac
  done
  COMPREPLY=($(compgen -W "$words" -- "\${COMP_WORDS[COMP_CWORD]}"))
}
complete -F _haru_complete haru
`;
}

/** `haru completion bash|zsh`: prints the completion script for the whole command tree. */
export function register(program: Command): void {
  program
    .command('completion <shell>')
    .description('print a shell completion script: eval "$(haru completion bash)" (zsh: the same after bashcompinit)')
    .action((shell: string) => {
      if (shell !== 'bash' && shell !== 'zsh') throw new BadInputError(`shell must be bash or zsh, not ${shell}`);
      const prelude = shell === 'zsh' ? 'autoload -U +X bashcompinit && bashcompinit\n' : '';
      process.stdout.write(prelude + bashCompletion(program));
    });
}
