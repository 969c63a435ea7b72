#!/usr/bin/env node
/**
 * Runs one test tier (jest.config.js): installs the Debian tools it needs (scripts/install-test-tools.js),
 * then jest on that tier's project, passing the other arguments to jest: `node scripts/test-tier.js unit core/`.
 * `--selectProjects` goes last because it takes every value up to the next flag.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const { installTestTools } = require('./install-test-tools');

const [tier, ...jestArgs] = process.argv.slice(2);
installTestTools(tier);
const jest = spawnSync(process.execPath, [require.resolve('jest/bin/jest'), ...jestArgs, '--selectProjects', tier], {
  stdio: 'inherit',
});
process.exit(jest.status ?? 1);
