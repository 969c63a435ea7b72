import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { databaseUrl, prepareTemplateDatabase, testAdminUrl } from './testing';

describe('test database template', () => {
  // A private name outside the haru_tpl_ prefix: no run clones it and no stale-template sweep drops it.
  const name = `haru_lazy_template_${randomBytes(4).toString('hex')}`;
  const admin = postgres(testAdminUrl(), { max: 1, onnotice: () => {} });
  afterAll(async () => {
    await admin.unsafe(`drop database if exists "${name}" with (force)`);
    await admin.end();
  });

  it('is built once, migrated, when several test files ask for it at the same time without globalSetup', async () => {
    const names = await Promise.all([1, 2, 3, 4].map(() => prepareTemplateDatabase(testAdminUrl(), name)));
    expect(new Set(names)).toEqual(new Set([name]));
    const databases = await admin`select datname from pg_database where datname like ${`${name}%`}`;
    expect(databases.map((d) => d.datname)).toEqual([name]);
    const template = postgres(databaseUrl(testAdminUrl(), name), { max: 1 });
    try {
      const [fleets] = await template`select to_regclass('public.fleets') as t`;
      expect(fleets?.t).toBe('fleets');
    } finally {
      await template.end();
    }
  });
});
