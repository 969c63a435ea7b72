/**
 * Preload (`node --require`) that runs a process on a clock `HARU_TEST_CLOCK_OFFSET_MS` away from the host's,
 * as a second host whose clock differs would: `Date.now()` and `new Date()` are shifted; timers,
 * `performance.now()` and the kernel are not, as with a skewed wall clock. What libfaketime does for a whole
 * process, for the JavaScript clock only (the one Haru reads).
 */
'use strict';
const offsetMs = Number(process.env.HARU_TEST_CLOCK_OFFSET_MS || 0);
if (offsetMs !== 0) {
  const RealDate = Date;
  class ShiftedDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(RealDate.now() + offsetMs);
      else super(...args);
    }
    static now() {
      return RealDate.now() + offsetMs;
    }
  }
  globalThis.Date = ShiftedDate;
}
