/** Log levels, least to most severe. `error`: a human must act; `warn`: degraded but handled; `info`: transitions. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/**
 * A JSON-lines logger: one object per line with `time`, `level`, `msg` and the fields. The message is a fixed
 * lowercase event; variables go in fields. Lines below `level` are dropped.
 */
export function createLogger(opts: {
  write: (line: string) => void;
  level?: LogLevel;
  now?: () => Date;
  base?: Record<string, unknown>;
}): Logger {
  const min = LOG_LEVELS.indexOf(opts.level ?? 'info');
  const now = opts.now ?? (() => new Date());
  const emit = (level: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(level) < min) return;
    const line: Record<string, unknown> = { time: now().toISOString(), level, msg, ...opts.base };
    // Fields never overwrite the envelope keys (a field named `level` would hide the log level).
    for (const [key, value] of Object.entries(fields ?? {})) if (!(key in line)) line[key] = value;
    opts.write(`${JSON.stringify(line)}\n`);
  };
  return { debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') };
}

/** A logger that drops everything (tests). */
export const silentLogger: Logger = createLogger({ write: () => {}, level: 'error' });
