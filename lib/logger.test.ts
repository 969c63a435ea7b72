import { createJsonLogger } from './logger';

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
});
