import { resendOff } from './resend';

describe('resendOff', () => {
  it('reads X-Haru-Resend: off, and the deprecated X-Haru-Migrate: off, in any case and spacing', () => {
    expect(resendOff({ 'x-haru-resend': 'off' })).toBe(true);
    expect(resendOff({ 'x-haru-resend': ' OFF ' })).toBe(true);
    expect(resendOff({ 'x-haru-migrate': 'off' })).toBe(true);
    expect(resendOff({})).toBe(false);
    expect(resendOff({ 'x-haru-resend': 'on', 'x-haru-migrate': 'yes' })).toBe(false);
  });
});
