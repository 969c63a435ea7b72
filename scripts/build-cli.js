#!/usr/bin/env node
/**
 * Compiles the `haru` command into one JavaScript file, dist/haru.js, so a start loads JavaScript instead of
 * compiling TypeScript (docs/architecture.md §8.6). Runs from `postinstall`; `bin/haru.js` uses the file only
 * while every source it was built from is unchanged (dist/haru.inputs.json), else falls back to tsx.
 * Packages stay external (node_modules is beside it). Plain CommonJS so it runs before any TypeScript tooling.
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const distDir = path.join(root, 'dist');
const entry = path.join(root, 'cli', 'main.ts');
const say = (msg) => process.stderr.write(`[haru build] ${msg}\n`);

/**
 * A bundled file's `__dirname` is dist/, not the folder the source sits in: rewrite it (and relative
 * `require.resolve`) to the source's own folder, found from the bundle's location so a moved checkout still works.
 */
const sourceDirPlugin = {
  name: 'source-dir',
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, async (args) => {
      // Only Haru's own sources: a dependency's are left as they are. Tested on the path inside the package,
      // since an installed Haru is itself in a node_modules folder (`npm i -g`).
      const own = path.relative(root, args.path);
      if (own.startsWith('..') || own.split(path.sep).includes('node_modules')) return undefined;
      let contents = await fs.promises.readFile(args.path, 'utf8');
      if (!contents.includes('__dirname') && !contents.includes('require.resolve(')) return { contents, loader: 'ts' };
      const rel = JSON.stringify(path.relative(root, path.dirname(args.path)).split(path.sep).join('/'));
      const dir = `require('node:path').join(__haruRoot, ${rel})`;
      contents = contents
        .replace(/\b__dirname\b/g, dir)
        .replace(
          /require\.resolve\((['"])(\.{1,2}\/[^'"]*)\1\)/g,
          (_, q, spec) => `require('node:path').join(${dir}, ${q}${spec}${q})`,
        );
      return { contents, loader: 'ts' };
    });
  },
};

/**
 * The sources each run of the bundle executes: `main` (cli/main.ts and what it imports, without the command
 * modules it loads on use) and, per command, its module `cli/commands/<name>.ts` and everything that reaches.
 * bin/haru.js runs the bundle when the sources of the command it is asked for are unchanged, so an edit
 * elsewhere in the tree (the API, the worker) does not send `haru fleet status` through tsx.
 */
function commandSources(metafile) {
  const rel = (input) => path.relative(root, path.resolve(root, input));
  const entry = rel(path.relative(root, path.join(root, 'cli', 'main.ts')));
  const isCommand = (from, to) => from === entry && /^cli\/commands\/[^/]+\.ts$/.test(to);
  const closure = (start, skip) => {
    const seen = new Set([start]);
    const queue = [start];
    while (queue.length) {
      const file = queue.pop();
      for (const imported of metafile.inputs[file]?.imports ?? []) {
        if (imported.external || seen.has(imported.path) || skip(file, imported.path)) continue;
        seen.add(imported.path);
        queue.push(imported.path);
      }
    }
    return [...seen].map(rel);
  };
  const commands = { main: closure(entry, isCommand) };
  for (const imported of metafile.inputs[entry]?.imports ?? []) {
    if (!isCommand(entry, imported.path)) continue;
    commands[path.basename(imported.path, '.ts')] = closure(imported.path, () => false);
  }
  return commands;
}

async function main() {
  if (!fs.existsSync(entry)) {
    // `npm ci` before the sources are copied (the Dockerfile's first layer): nothing to build yet.
    say('no sources yet; skipped');
    return;
  }
  let esbuild;
  try {
    esbuild = require('esbuild');
  } catch {
    say('esbuild is not installed; haru runs its TypeScript through tsx');
    return;
  }
  fs.mkdirSync(distDir, { recursive: true });
  const outfile = path.join(distDir, 'haru.js');
  const result = await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    packages: 'external',
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'warning',
    banner: { js: "const __haruRoot = require('node:path').resolve(__dirname, '..');" },
    plugins: [sourceDirPlugin],
  });
  const inputs = {};
  for (const input of Object.keys(result.metafile.inputs)) {
    const file = path.resolve(root, input);
    inputs[path.relative(root, file)] = fs.statSync(file).mtimeMs;
  }
  const builtAt = fs.statSync(outfile).mtimeMs;
  const commands = commandSources(result.metafile);
  fs.writeFileSync(path.join(distDir, 'haru.inputs.json'), JSON.stringify({ builtAt, inputs, commands }));
  say(`dist/haru.js from ${Object.keys(inputs).length} sources`);
}

main().catch((err) => {
  // A failed build must not fail the install: bin/haru.js falls back to tsx.
  say(`failed, haru runs its TypeScript through tsx: ${err.message}`);
});
