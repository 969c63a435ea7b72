import { domainStatusResponseSchema } from '../../schemas/status';
import { formatDomainStatus } from './status';

const at = '2030-01-01T00:00:00.000Z';
const status = domainStatusResponseSchema.parse({
  fleetId: '00000000-0000-4000-8000-000000000001',
  fleetSlug: 'prod',
  at,
  domain: {
    id: '00000000-0000-4000-8000-00000000000b',
    slug: 'b',
    state: 'ready',
    isActive: false,
    lastSeenAt: at,
    consecutiveFailures: 0,
    lastError: null,
    lastSeenAgeMs: 500,
    isStale: false,
  },
  host: {
    isReachable: true,
    error: null,
    at,
    models: [],
    gpus: [],
    training: [
      {
        gpuIndex: 0,
        state: 'idle',
        pids: [],
        startedAt: null,
        lastExit: { code: 137, signal: null, at },
        runningForMs: null,
      },
    ],
  },
});

describe('formatDomainStatus', () => {
  it("shows a training run's last exit with its age, not its time", () => {
    const row = formatDomainStatus(status, new Date('2030-01-01T02:00:00.000Z'))
      .split('\n')
      .find((l) => l.startsWith('0 '));
    expect(row).toMatch(/^0 +idle +- +- +- +0 +137 120m ago$/);
  });
});
