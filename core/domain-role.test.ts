import { domainRole } from './domain-role';

describe('domainRole', () => {
  it('calls the pointer’s domain active, a ready or degraded one standby, and any other by its state', () => {
    expect(domainRole('failed', true)).toBe('active');
    expect(domainRole('ready', false)).toBe('standby');
    expect(domainRole('degraded', false)).toBe('standby');
    expect(domainRole('failed', false)).toBe('failed');
    expect(domainRole('stopped', false)).toBe('stopped');
    expect(domainRole('provisioning', false)).toBe('provisioning');
  });
});
