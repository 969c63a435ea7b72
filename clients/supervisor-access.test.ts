import { createHmac } from 'node:crypto';
import { domainToken, issuedSupervisorToken, SupervisorAccessError } from './supervisor-access';

const EAST = '1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed';
const WEST = '6ec0bd7f-11c0-43da-975e-2a8ad9ebae0b';
const target = (over: Record<string, unknown> = {}) => ({
  id: EAST,
  slug: 'east',
  supervisorUrl: 'https://east.gpu.example.com:8701',
  supervisor: { issueToken: true },
  ...over,
});

describe('an issued supervisor token', () => {
  it('is the HMAC-SHA256 of the domain id under the token it would otherwise get, one per domain', () => {
    const issued = domainToken(target(), {}, 'fleet-token');
    expect(issued).toBe(createHmac('sha256', 'fleet-token').update(`haru supervisor token v1 ${EAST}`).digest('hex'));
    expect(issued).toMatch(/^[0-9a-f]{64}$/);
    expect(issued).toBe(issuedSupervisorToken('fleet-token', EAST));
    expect(domainToken(target({ id: WEST }), {}, 'fleet-token')).not.toBe(issued);
    expect(domainToken(target(), {}, 'another-fleet-token')).not.toBe(issued);
    // Without issueToken the domain gets the token itself.
    expect(domainToken(target({ supervisor: null }), {}, 'fleet-token')).toBe('fleet-token');
  });

  it("is derived from the domain's own token source when it names one", () => {
    const env = { HARU_SECRET_EAST_TOKEN: 'east-token' };
    const issued = domainToken(
      target({ supervisor: { issueToken: true, tokenEnv: 'HARU_SECRET_EAST_TOKEN' } }),
      env,
      'x',
    );
    expect(issued).toBe(issuedSupervisorToken('east-token', EAST));
  });

  it('refuses without a token to derive it from, or without the domain id, naming the field', () => {
    expect(() => domainToken(target(), {}, undefined)).toThrow(
      new SupervisorAccessError(
        "domain east: supervisor.issueToken: derives the host's token from HARU_SUPERVISOR_TOKEN, which is not set",
      ),
    );
    expect(() => domainToken(target({ id: undefined }), {}, 'fleet-token')).toThrow(
      /supervisor\.issueToken: the domain's id is not known here/,
    );
  });
});
