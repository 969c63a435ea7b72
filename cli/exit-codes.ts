import { CommanderError } from 'commander';

/**
 * The `haru` command's exit statuses, decided here and nowhere else: 0 done, 1 the work failed (an API call
 * was refused or unreachable, a followed operation failed), 2 the input was wrong (an unknown option, a bad
 * option value, a missing argument, a bad configuration or config file) and nothing was attempted.
 */
export const EXIT = { ok: 0, failed: 1, badInput: 2 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** Input the command refuses before doing anything: printed as one line, exit 2. */
export class BadInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadInputError';
  }
}

/**
 * The exit status for an error that ended the command. Commander answers `--help` and `--version` with
 * exit code 0 and every parse problem with 1; the latter are bad input here.
 */
export function exitCodeFor(err: unknown): ExitCode {
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.badInput;
  // ConfigError (schemas/env.ts) by its name: importing it would load zod into every start, `--version` too.
  if (err instanceof BadInputError || (err instanceof Error && err.name === 'ConfigError')) return EXIT.badInput;
  return EXIT.failed;
}

/**
 * Whether the error's message was printed already: commander writes its own before throwing (a command's
 * action throws BadInputError, never commander's InvalidArgumentError, which would go unprinted).
 */
export const isAlreadyReported = (err: unknown): boolean => err instanceof CommanderError;
