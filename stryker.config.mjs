// @ts-check
/**
 * The mutation bench (`npm run bench:mutation`, not part of `npm test`): mutates the proxy and the pure
 * decisions and runs only their unit tests (jest.mutation.config.js). Narrow a run with `--mutate <glob>`.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'jest',
  jest: { projectType: 'custom', configFile: 'jest.mutation.config.js', enableFindRelatedTests: true },
  coverageAnalysis: 'perTest',
  mutate: ['api/proxy/**/*.ts', 'core/**/*.ts', '!**/*.test.ts', '!**/*fixtures.ts', '!**/fixtures/**'],
  ignorePatterns: ['.haru', 'dist', 'docs', 'deploy', 'examples', 'bench/results', 'reports', 'coverage'],
  concurrency: 2,
  // A hung mutant (a stalled stream) is a kill; waiting long for it only slows the run.
  timeoutMS: 3_000,
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
