/** Rotating the supervisor token: during the overlap both the new and the previous token are accepted. */
import { createSupervisorClient } from '../../activities/supervisor-client';
import { FailureType } from '../../schemas/failures';
import { type RunningSupervisor, startSupervisor } from '../../supervisor/main';

const CONFIG = JSON.stringify({ inference: [{ gpuIndex: 0, models: [{ name: 'm', port: 1 }] }] });

describe('supervisor token rotation', () => {
  let supervisor: RunningSupervisor;
  beforeAll(async () => {
    supervisor = await startSupervisor(
      {
        HARU_SUPERVISOR_CONFIG: CONFIG,
        HARU_SUPERVISOR_TOKEN: 'new-token',
        HARU_SUPERVISOR_TOKEN_PREVIOUS: 'old-token',
        HARU_SUPERVISOR_HOST: '127.0.0.1',
        PORT: '0',
      },
      { write: () => undefined, warn: () => undefined },
    );
  });
  afterAll(() => supervisor?.shutdown(0));

  const status = (token: string) =>
    createSupervisorClient({ token, defaultTimeoutMs: 5_000 }).status({
      slug: 'east',
      supervisorUrl: `http://127.0.0.1:${supervisor.port}`,
    });

  it('accepts the new token and the previous one, and nothing else', async () => {
    await expect(status('new-token')).resolves.toHaveProperty('models');
    await expect(status('old-token')).resolves.toHaveProperty('models');
    const refused = await status('another-token').catch((err: unknown) => err);
    expect(refused).toMatchObject({ type: FailureType.Unauthorized, nonRetryable: true });
  });
});
