/**
 * Jest in three tiers, one project each; `npm test` runs them in this order and stops at the first that fails
 * (README, Development; docs/architecture.md §8.4). A test file's tier follows from its path alone:
 * - system: chaos, end to end, deploy, the dev stack (`test/{chaos,compose,deploy,dev}/`, `*.e2e.test.ts`);
 * - integration: real Postgres or Temporal, a simulated GPU host's processes (supervisor, vLLM engines,
 *   trainers) or an outside tool (`*.int.test.ts`, `*.workflow.test.ts`,
 *   `test/{api,provisioning,supervisor,temporal,workflows}/`);
 * - unit: every other `*.test.ts`: pure code and in-process (a short command such as openssl at most), with no
 *   global setup.
 * integration and system share one globalSetup (jest runs it once per run): it starts one Temporal dev server,
 * bundles the workflows once and migrates a template database (test/global-setup.ts). test/tiers.test.ts fails
 * when a unit test reaches the Temporal server or the test database.
 */
const ROOT = __dirname;

const SYSTEM = [`${ROOT}/test/{chaos,compose,deploy,dev}/**/*.test.ts`, `${ROOT}/**/*.e2e.test.ts`];
const INTEGRATION = [
  `${ROOT}/**/*.{int,workflow}.test.ts`,
  `${ROOT}/test/{api,provisioning,supervisor,temporal,workflows}/**/*.test.ts`,
];
const not = (globs) => globs.map((glob) => `!${glob}`);

const base = {
  rootDir: ROOT,
  testEnvironment: 'node',
  transform: {
    '^.+\\.(t|j)sx?$': ['@swc/jest', { jsc: { target: 'es2022' } }],
    // PGlite's CommonJS build loads Node built-ins with import(), which jest's VM refuses without
    // --experimental-vm-modules; compiling it to CommonJS turns those into require().
    '/node_modules/@electric-sql/pglite/dist/.+\\.cjs$': [
      '@swc/jest',
      { jsc: { target: 'es2022' }, module: { type: 'commonjs' } },
    ],
  },
  transformIgnorePatterns: ['/node_modules/(?!@electric-sql/pglite/)'],
  // .stryker-tmp/: the mutation bench's sandbox copy of the project (npm run bench:mutation).
  testPathIgnorePatterns: ['/node_modules/', '/.haru/', '/dist/', '<rootDir>/.stryker-tmp/'],
  modulePathIgnorePatterns: ['<rootDir>/.haru/', '<rootDir>/.stryker-tmp/'],
};
const servers = { globalSetup: '<rootDir>/test/global-setup.ts', globalTeardown: '<rootDir>/test/global-teardown.ts' };

module.exports = {
  projects: [
    { ...base, displayName: 'unit', testMatch: [`${ROOT}/**/*.test.ts`, ...not(SYSTEM), ...not(INTEGRATION)] },
    { ...base, ...servers, displayName: 'integration', testMatch: [...INTEGRATION, ...not(SYSTEM)] },
    { ...base, ...servers, displayName: 'system', testMatch: SYSTEM },
  ],
  maxWorkers: 2,
  testTimeout: 60_000,
};
