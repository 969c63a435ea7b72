import { DefaultLogger, type LogEntry, type LogLevel } from '@temporalio/worker';

const LEVELS: Record<'debug' | 'info' | 'warn' | 'error', LogLevel> = {
  debug: 'DEBUG',
  info: 'INFO',
  warn: 'WARN',
  error: 'ERROR',
};

/**
 * The worker's JSON-lines logger, installed as the Temporal Runtime logger so SDK, workflow and
 * activity logs share one format: `{ time, level, msg, ...fields }`.
 */
export function createWorkerLogger(level: keyof typeof LEVELS, write: (line: string) => void): DefaultLogger {
  return new DefaultLogger(LEVELS[level], (entry: LogEntry) => {
    const time = new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString();
    const line = { time, level: entry.level.toLowerCase(), msg: entry.message, service: 'haru-worker', ...entry.meta };
    write(`${JSON.stringify(line, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}\n`);
  });
}
