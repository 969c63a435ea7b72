import { commandNameOf } from './global-options';

describe('commandNameOf', () => {
  it('skips the values of the global options that take one', () => {
    expect(commandNameOf(['--server', 'http://x', 'fleet', 'status', 'prod'])).toBe('fleet');
    expect(commandNameOf(['--token', 't', '--context', 'prod', '--insecure-http', 'domain'])).toBe('domain');
    expect(commandNameOf(['fleet', '--server', 'http://x'])).toBe('fleet');
    expect(commandNameOf(['--version'])).toBeUndefined();
  });
});
