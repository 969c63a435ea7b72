/**
 * Jest for the mutation bench (stryker.config.mjs): only the pure unit tests of the mutated code, and no
 * globalSetup (no Temporal dev server, no template database), so each mutant runs in about a second.
 */
const { globalSetup: _setup, globalTeardown: _teardown, ...base } = require('./jest.config');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/api/proxy/**/*.test.ts', '<rootDir>/core/**/*.test.ts'],
};
