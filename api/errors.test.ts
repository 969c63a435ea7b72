import { StoreError } from '../db/store-error';
import { toHaruError } from './errors';

describe('toHaruError', () => {
  it.each([
    [new StoreError('not_found', 'no fleet x', 'fleet'), 'fleet_not_found', 404],
    [new StoreError('not_found', 'no domain x', 'domain'), 'domain_not_found', 404],
    [new StoreError('not_found', 'no operation x', 'operation'), 'operation_not_found', 404],
    [new StoreError('not_found', 'nothing'), 'not_found', 404],
    [new StoreError('invalid_reference', 'domain x is not in fleet y'), 'invalid_target', 422],
    [new StoreError('unavailable', 'fleet row held'), 'state_store_unavailable', 503],
  ])('maps the store refusal %p to %s (%d), keeping its message', (err, code, status) => {
    const mapped = toHaruError(err);
    expect([mapped.code, mapped.status, mapped.message]).toEqual([code, status, err.message]);
  });

  it("maps an unreachable database, seen through drizzle's wrapper, to state_store_unavailable", () => {
    const down = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    expect(toHaruError(new Error('Failed query', { cause: down })).code).toBe('state_store_unavailable');
  });

  it('hides anything else as internal_error', () => {
    expect(toHaruError(new Error('boom')).toBody()).toEqual({
      error: { code: 'internal_error', message: 'internal error' },
    });
  });
});

describe('toHaruError for a database that cannot serve', () => {
  it.each(['55000', '53300', '25006', '08006', '08001', '57P01', '57P03', '57P04'])(
    'maps SQLSTATE %s to 503 state_store_unavailable, naming the code',
    (code) => {
      const pgError = Object.assign(new Error('refused'), { code });
      const mapped = toHaruError(new Error('Failed query', { cause: pgError }));
      expect([mapped.code, mapped.status, mapped.details?.storeCode]).toEqual(['state_store_unavailable', 503, code]);
      expect(mapped.message).toContain(code);
    },
  );

  it.each(['23505', '42P01', '40001'])('keeps SQLSTATE %s (a query that failed) an internal_error', (code) => {
    expect(toHaruError(Object.assign(new Error('x'), { code })).code).toBe('internal_error');
  });
});
