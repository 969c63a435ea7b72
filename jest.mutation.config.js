/**
 * Jest for the mutation bench (stryker.config.mjs): only the pure unit tests of the mutated code, in the unit
 * tier's project (no globalSetup: no Temporal dev server, no template database), so each mutant runs in about
 * a second.
 */
const { projects, ...run } = require('./jest.config');
const { displayName: _name, testMatch: _tier, ...unit } = projects.find((p) => p.displayName === 'unit');

module.exports = {
  ...run,
  ...unit,
  testMatch: ['<rootDir>/api/proxy/**/*.test.ts', '<rootDir>/core/**/*.test.ts'],
};
