import { domainSnapshot } from '../../core/fleet-fixtures';
import type { HostReading } from '../../schemas/status';
import { ago, ID, NOW, snapshot } from '../../test/support/fleet-page-fixtures';
import { domainRows, gpuMemoryText } from './domain-rows';

const reading = (gpus: HostReading['gpus']): HostReading => ({
  isReachable: true,
  error: null,
  at: NOW.toISOString(),
  models: [],
  training: [],
  gpus,
});
const gpu = (index: number, usedMiB: number | null, totalMiB: number | null) => ({
  index,
  uuid: `GPU-${index}`,
  usedMiB,
  totalMiB,
  processes: [],
  source: 'device' as const,
  migDevice: null,
  error: null,
  models: [],
});

describe('domainRows', () => {
  it('shows the active awake and the standby asleep and training, ready to take over, with their ages', () => {
    const [a, b] = domainRows(snapshot(), new Map(), NOW);
    expect(a).toMatchObject({
      slug: 'a',
      role: 'active',
      tone: 'ok',
      heard: '1 s ago',
      isStale: false,
      models: [{ name: 'llama', gpuIndex: 0, state: 'awake' }],
      training: [{ gpuIndex: 0, state: 'idle' }],
      gpuMemory: null,
      takeover: null,
    });
    expect(b).toMatchObject({
      role: 'standby',
      tone: 'ok',
      heard: '2 s ago',
      models: [{ name: 'llama', state: 'asleep' }],
      training: [{ gpuIndex: 0, state: 'training' }],
      takeover: { isReady: true, text: 'ready to take over' },
    });
  });

  it('labels a dead old active failed, never standby, with its slots unknown and why it cannot take over', () => {
    const fleet = snapshot({
      activeDomainId: ID.b,
      domains: [
        domainSnapshot('a', { state: 'failed', isActive: false, lastSeenAt: ago(40_000), consecutiveFailures: 7 }),
        domainSnapshot('b', { isActive: true, lastSeenAt: ago(500) }),
      ],
    });
    const [a] = domainRows(fleet, new Map(), NOW);
    expect(a).toMatchObject({
      role: 'failed',
      tone: 'bad',
      heard: '40 s ago',
      isStale: true,
      models: [{ name: 'llama', state: 'unknown' }],
      training: [{ gpuIndex: 0, state: 'unknown' }],
      takeover: { isReady: false, text: 'not ready: it is failed, not heard recently, 7 missed polls' },
    });
  });

  it('shows a standby silent past the stale limit as stale, still a standby, not ready', () => {
    const fleet = snapshot({ domains: [domainSnapshot('a'), domainSnapshot('b', { lastSeenAt: ago(6_000) })] });
    const b = domainRows(fleet, new Map(), NOW)[1]!;
    expect(b).toMatchObject({ role: 'standby', tone: 'bad', isStale: true, heard: '6 s ago' });
    expect(b.takeover).toEqual({ isReady: false, text: 'not ready: not heard recently' });
    expect(b.models[0]!.state).toBe('unknown');
  });

  it('shows GPU memory as the host answered, unknown when it was not read or did not answer', () => {
    const hosts = new Map([
      [ID.a, reading([gpu(0, 12_595, 81_920)])],
      [ID.b, { ...reading([]), isReachable: false, error: 'connect ECONNREFUSED' }],
    ]);
    const [a, b] = domainRows(snapshot(), hosts, NOW);
    expect(a!.gpuMemory).toEqual(['GPU 0: 12.3 / 80.0 GiB']);
    expect(b!.gpuMemory).toBeNull();
  });
});

describe('gpuMemoryText', () => {
  it('reads used of total in GiB, used alone without a total, and unreadable on an error', () => {
    expect(gpuMemoryText(gpu(1, 1_024, null))).toBe('GPU 1: 1.0 GiB used');
    expect(gpuMemoryText({ ...gpu(2, null, 81_920), error: { kind: 'lost', message: 'x' } })).toBe('GPU 2: unreadable');
  });
});
