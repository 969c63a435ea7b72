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
const ENVELOPE_KEYS: ReadonlySet<string> = new Set(['time', 'level', 'msg']);

/** `,"key":value` for each own field not in `skip` and not undefined (as JSON.stringify would drop it). */
function appendFields(out: string, fields: Record<string, unknown>, skip?: Record<string, unknown>): string {
  for (const key in fields) {
    if (ENVELOPE_KEYS.has(key) || (skip && key in skip) || !Object.hasOwn(fields, key)) continue;
    const json = JSON.stringify(fields[key]);
    if (json !== undefined) out += `,${JSON.stringify(key)}:${json}`;
  }
  return out;
}

/** True when `fields` names no envelope key and nothing of `base`: then it is serialised in one piece. */
function disjoint(fields: Record<string, unknown>, base: Record<string, unknown>): boolean {
  for (const key in fields) if (ENVELOPE_KEYS.has(key) || key in base) return false;
  return true;
}

/**
 * Writes one JSON object per line to `write` for entries at or above `level` (default `info`):
 * `time`, `level`, `msg`, then `base`, then the call's fields. A field named like an envelope key is
 * dropped (a field `level` would otherwise hide the log level); a call's field overrides `base`. The line is
 * built field by field (no merged copy of base and fields): the API writes one per request (its access log).
 */
export function createJsonLogger(opts: {
  write: (line: string) => void;
  level?: LogLevel;
  now?: () => Date;
  base?: Record<string, unknown>;
}): Logger {
  const min = LOG_LEVELS.indexOf(opts.level ?? 'info');
  const now = opts.now ?? (() => new Date());
  const base = opts.base ?? {};
  const baseJson = appendFields('', base);
  const emit = (level: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(level) < min) return;
    const head = `{"time":"${now().toISOString()}","level":"${level}","msg":${JSON.stringify(msg)}`;
    if (!fields) return opts.write(`${head}${baseJson}}\n`);
    if (!disjoint(fields, base)) return opts.write(`${appendFields(head, base, fields)}${appendFields('', fields)}}\n`);
    const json = JSON.stringify(fields);
    opts.write(`${head}${baseJson}${json.length > 2 ? `,${json.slice(1)}` : '}'}\n`);
  };
  return { debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') };
}

/** A logger that drops everything (tests). */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * A `write` for createJsonLogger that joins lines into one `sink` call (one `write(2)` to stdout instead of
 * one per line: stdout to a pipe or file is synchronous on Linux, and the API logs a line per request, each
 * write waking whatever reads the pipe): what is logged within `intervalMs` (default 10) goes out together,
 * or at once when `maxChars` (default 64 Ki) are pending. Lines keep their order and stay one per line;
 * `flush` writes what is pending now, and a process `exit` flushes too, so a line logged before
 * `process.exit` is not lost. The timer does not keep the process alive.
 */
export function batchedLineWriter(
  sink: (chunk: string) => void,
  opts: { intervalMs?: number; maxChars?: number } = {},
): { write: (line: string) => void; flush: () => void } {
  const intervalMs = opts.intervalMs ?? 10;
  const maxChars = opts.maxChars ?? 64 * 1024;
  let pending = '';
  let timer: NodeJS.Timeout | null = null;
  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    if (pending === '') return;
    const chunk = pending;
    pending = '';
    sink(chunk);
  };
  process.once('exit', flush);
  return {
    write(line) {
      pending += line;
      if (pending.length >= maxChars) flush();
      else if (!timer) timer = setTimeout(flush, intervalMs).unref();
    },
    flush,
  };
}
