import { ConfigError } from '../schemas/env';
import { loadWorkerConfig } from './config';

describe('loadWorkerConfig', () => {
  it('fills every default, counting blank variables as unset', () => {
    expect(loadWorkerConfig({ TEMPORAL_ADDRESS: ' ', HARU_TASK_QUEUE: '' })).toMatchObject({
      temporal: { address: 'localhost:7233', namespace: 'default', connection: { address: 'localhost:7233' } },
      HARU_TASK_QUEUE: 'haru',
      HARU_WORKER_METRICS_PORT: 9464,
      HARU_WORKER_MAX_ACTIVITIES: 500,
      HARU_WORKER_MAX_MONITORS: 2000,
      HARU_WORKER_QUEUES: 'all',
      HARU_STATE_DIR: '.haru',
      LOG_LEVEL: 'info',
    });
  });

  it('reads the connection, store, token and metrics settings', () => {
    const config = loadWorkerConfig({
      TEMPORAL_ADDRESS: 'temporal:7233',
      TEMPORAL_NAMESPACE: 'prod',
      HARU_TASK_QUEUE: 'haru-eu',
      DATABASE_URL: 'postgres://haru@db:5432/haru',
      HARU_SUPERVISOR_TOKEN: 's3cret',
      HARU_WORKER_METRICS_PORT: '0',
      HARU_WORKER_MAX_ACTIVITIES: '300',
      HARU_WORKER_MAX_MONITORS: '60',
      HARU_WORKER_QUEUES: 'monitors',
    });
    expect(config).toMatchObject({
      temporal: { address: 'temporal:7233', namespace: 'prod' },
      HARU_TASK_QUEUE: 'haru-eu',
      DATABASE_URL: 'postgres://haru@db:5432/haru',
      HARU_SUPERVISOR_TOKEN: 's3cret',
      HARU_WORKER_METRICS_PORT: 0,
      HARU_WORKER_MAX_ACTIVITIES: 300,
      HARU_WORKER_MAX_MONITORS: 60,
      HARU_WORKER_QUEUES: 'monitors',
    });
  });

  it('refuses bad values with one line per variable, naming it', () => {
    const err = (() => {
      try {
        loadWorkerConfig({
          DATABASE_URL: 'mysql://x',
          HARU_WORKER_METRICS_PORT: 'ninety',
          HARU_WORKER_MAX_ACTIVITIES: '0',
          HARU_WORKER_MAX_MONITORS: '1',
          HARU_WORKER_QUEUES: 'both',
          LOG_LEVEL: 'loud',
        });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    expect(message).toMatch(/^invalid worker environment:/);
    for (const name of [
      'DATABASE_URL',
      'HARU_WORKER_METRICS_PORT',
      'HARU_WORKER_MAX_ACTIVITIES',
      'HARU_WORKER_MAX_MONITORS',
      'HARU_WORKER_QUEUES',
      'LOG_LEVEL',
    ])
      expect(message).toContain(`  ${name}:`);
  });
});
