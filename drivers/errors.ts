/** How much of a failed command's stderr an error carries (the tail: where the reason usually is). */
export const STDERR_CAP_CHARS = 4_000;

/** The last `cap` characters of `text`, marked when cut. */
export function capTail(text: string, cap = STDERR_CAP_CHARS): string {
  const trimmed = text.trimEnd();
  return trimmed.length <= cap ? trimmed : `…${trimmed.slice(trimmed.length - cap)}`;
}

/**
 * A `sky` command that did not succeed: a non-zero exit, a kill, our timeout, or output we could not
 * read. Carries the argv (never a secret: secrets travel as environment variables) and a capped stderr.
 */
export class SkyCommandError extends Error {
  override readonly name = 'SkyCommandError';
  constructor(
    /** `sky` and its arguments as run. */
    readonly command: readonly string[],
    readonly reason: 'exit' | 'timeout' | 'aborted' | 'signal' | 'unparseable' | 'spawn',
    readonly exitCode: number | null,
    /** The tail of stderr (or of stdout when stderr was empty), at most STDERR_CAP_CHARS. */
    readonly stderr: string,
    detail?: string,
  ) {
    super(SkyCommandError.describe(command, reason, exitCode, stderr, detail));
  }

  private static describe(
    command: readonly string[],
    reason: SkyCommandError['reason'],
    exitCode: number | null,
    stderr: string,
    detail?: string,
  ): string {
    const what = `\`${command.join(' ')}\``;
    const why =
      reason === 'exit'
        ? `exited with code ${exitCode}`
        : reason === 'timeout'
          ? `timed out${detail ? ` after ${detail}` : ''}`
          : reason === 'aborted'
            ? 'was cancelled'
            : reason === 'signal'
              ? `was killed${detail ? ` by ${detail}` : ''}`
              : reason === 'spawn'
                ? `could not be started${detail ? `: ${detail}` : ''}`
                : `printed output that could not be read${detail ? `: ${detail}` : ''}`;
    const tail = stderr ? `: ${stderr.split('\n').slice(-3).join(' | ')}` : '';
    return `${what} ${why}${tail}`;
  }
}

/** A secret a launch names is not in the environment `sky` runs with: nothing was run. */
export class SecretNotSetError extends Error {
  override readonly name = 'SecretNotSetError';
  constructor(readonly secret: string) {
    super(`secret ${secret} is not set in the environment the sky CLI runs with (the worker's)`);
  }
}
