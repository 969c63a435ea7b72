import { batchedLineWriter, createJsonLogger } from './logger';

const at = new Date('2026-01-02T03:04:05.000Z');

function capture(level?: 'debug' | 'info' | 'warn' | 'error', base?: Record<string, unknown>) {
  const lines: string[] = [];
  const logger = createJsonLogger({ write: (line) => lines.push(line), level, now: () => at, base });
  return { logger, lines, parsed: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

describe('createJsonLogger', () => {
  it('writes one JSON object per line: time, level, msg, then base and fields', () => {
    const { logger, lines } = capture('info', { service: 'haru-api' });
    logger.info('routing committed', { fleetId: 'f1', revision: 3 });
    expect(lines).toEqual([
      '{"time":"2026-01-02T03:04:05.000Z","level":"info","msg":"routing committed","service":"haru-api","fleetId":"f1","revision":3}\n',
    ]);
  });

  it('drops entries below the level (info by default)', () => {
    const { logger, parsed } = capture();
    logger.debug('noisy');
    logger.info('kept');
    logger.warn('kept too');
    expect(parsed().map((l) => l.msg)).toEqual(['kept', 'kept too']);
    const errorsOnly = capture('error');
    errorsOnly.logger.warn('dropped');
    errorsOnly.logger.error('kept');
    expect(errorsOnly.parsed().map((l) => l.level)).toEqual(['error']);
  });

  it('never lets base or a field replace time, level or msg', () => {
    const { logger, parsed } = capture('info', { level: 'debug', time: 'then' });
    logger.error('disk full', { level: 'info', msg: 'fine', time: 'now', path: '/data' });
    expect(parsed()).toEqual([{ time: at.toISOString(), level: 'error', msg: 'disk full', path: '/data' }]);
  });

  it("lets a call's field override base", () => {
    const { logger, parsed } = capture('info', { component: 'proxy' });
    logger.info('held', { component: 'hold-queue' });
    expect(parsed()[0]?.component).toBe('hold-queue');
  });

  it('serialises like JSON.stringify: undefined fields dropped, no fields, an empty object', () => {
    const { logger, parsed } = capture('info', { service: 'haru-api', region: undefined });
    logger.info('a', { fleet: 'f', domain: undefined, nested: { ok: true } });
    logger.info('b');
    logger.info('c', {});
    expect(parsed()).toEqual([
      { time: at.toISOString(), level: 'info', msg: 'a', service: 'haru-api', fleet: 'f', nested: { ok: true } },
      { time: at.toISOString(), level: 'info', msg: 'b', service: 'haru-api' },
      { time: at.toISOString(), level: 'info', msg: 'c', service: 'haru-api' },
    ]);
  });
});

describe('batchedLineWriter', () => {
  it('joins the lines written within its interval into one write, in order', async () => {
    const chunks: string[] = [];
    const writer = batchedLineWriter((chunk) => chunks.push(chunk), { intervalMs: 20 });
    writer.write('one\n');
    await new Promise((resolve) => setImmediate(resolve));
    writer.write('two\n');
    expect(chunks).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(chunks).toEqual(['one\ntwo\n']);
    writer.write('three\n');
    writer.flush();
    expect(chunks).toEqual(['one\ntwo\n', 'three\n']);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(chunks).toHaveLength(2);
  });

  it('writes at once when the pending lines reach its size bound', () => {
    const chunks: string[] = [];
    const writer = batchedLineWriter((chunk) => chunks.push(chunk), { intervalMs: 60_000, maxChars: 8 });
    writer.write('abc\n');
    expect(chunks).toEqual([]);
    writer.write('defg\n');
    expect(chunks).toEqual(['abc\ndefg\n']);
    writer.write('h\n');
    writer.flush();
    expect(chunks).toEqual(['abc\ndefg\n', 'h\n']);
  });
});
