import { type Command, InvalidArgumentError, Option } from 'commander';
import { OUTPUT_FORMATS, type OutputFormat } from './output';

/**
 * An option-argument parser for an integer in [min, max]; a bad value is commander's one-line
 * `option '--limit <n>' argument '0' is invalid. ...`, not a stack of zod issues.
 */
export function integerArg(min: number, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(
        max === Number.MAX_SAFE_INTEGER ? `must be an integer >= ${min}` : `must be an integer from ${min} to ${max}`,
      );
    }
    return n;
  };
}

/**
 * Gives every command that offers `--json` the same `-o, --output table|wide|json|yaml` (table is the
 * default; `--json` is short for `-o json`), so scripts can pass one flag to any read command.
 */
export function addOutputOption(program: Command): void {
  const walk = (cmd: Command) => {
    if (cmd.options.some((o) => o.long === '--json')) {
      cmd.addOption(new Option('-o, --output <format>', 'output format').choices(OUTPUT_FORMATS));
    }
    cmd.commands.forEach(walk);
  };
  program.commands.forEach(walk);
  program.hook('preAction', (_root, action) => {
    const output = action.getOptionValue('output') as OutputFormat | undefined;
    if (output) action.setOptionValue('json', output === 'json' || output === 'yaml');
  });
}
