#!/usr/bin/env node
// The `haru` command. Sources are TypeScript, loaded through tsx so one tree serves dev, tests and production.
require('tsx/cjs');
require('../cli/main.ts');
