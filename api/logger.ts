/** Log levels in increasing severity: `error` means a human must act, `warn` degraded but handled. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** A JSON-lines logger: a fixed lowercase message, variables in fields. Never log prompts or tokens. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** Writes one JSON object per line to `write` for entries at or above `level`. */
export function createJsonLogger(opts: {
  level?: LogLevel;
  write: (line: string) => void;
  now?: () => Date;
  base?: Record<string, unknown>;
}): Logger {
  const min = LOG_LEVELS.indexOf(opts.level ?? 'info');
  const now = opts.now ?? (() => new Date());
  const emit = (level: LogLevel) => (message: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(level) < min) return;
    opts.write(`${JSON.stringify({ time: now().toISOString(), level, msg: message, ...opts.base, ...fields })}\n`);
  };
  return { debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') };
}

/** A logger that drops everything (tests). */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
