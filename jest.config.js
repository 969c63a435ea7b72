/** Jest: one run for every layer. globalSetup starts one Temporal dev server, bundles the workflows once
 * and migrates a template database, so test files stay fast (see test/global-setup.ts). */
module.exports = {
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
  testMatch: ['**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/.haru/', '/dist/', '<rootDir>/.stryker-tmp/'],
  // .stryker-tmp/: the mutation bench's sandbox copy of the project (npm run bench:mutation).
  modulePathIgnorePatterns: ['<rootDir>/.haru/', '<rootDir>/.stryker-tmp/'],
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  maxWorkers: 2,
  testTimeout: 60_000,
};
