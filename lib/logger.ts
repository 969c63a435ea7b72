/** Log levels, least to most severe. `error`: a human must act; `warn`: degraded but handled; `info`: transitions. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** A JSON-lines logger: a fixed lowercase message, variables in fields. Never log prompts, completions or tokens. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** The keys every line starts with; neither `base` nor a call's fields can replace them. */
const ENVELOPE_KEYS = ['time', 'level', 'msg'] as const;

/**
 * Writes one JSON object per line to `write` for entries at or above `level` (default `info`):
 * `time`, `level`, `msg`, then `base`, then the call's fields. A field named like an envelope key is
 * dropped (a field `level` would otherwise hide the log level); a call's field overrides `base`.
 */
export function createJsonLogger(opts: {
  write: (line: string) => void;
  level?: LogLevel;
  now?: () => Date;
  base?: Record<string, unknown>;
}): Logger {
  const min = LOG_LEVELS.indexOf(opts.level ?? 'info');
  const now = opts.now ?? (() => new Date());
  const emit = (level: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(level) < min) return;
    const line: Record<string, unknown> = { ...opts.base, ...fields };
    for (const key of ENVELOPE_KEYS) delete line[key];
    opts.write(`${JSON.stringify({ time: now().toISOString(), level, msg, ...line })}\n`);
  };
  return { debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') };
}

/** A logger that drops everything (tests). */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
