import js from '@eslint/js';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';
import direction from './dependency-direction.cjs';

export default tseslint.config(
  { ignores: ['node_modules/', '.haru/', 'dist/', 'db/migrations/', 'coverage/', '.stryker-tmp/', 'reports/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js', '.cjs', '.mjs'],
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js', '.cjs', '.mjs', '.json'] })],
    },
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        require: 'readonly',
        module: 'writable',
        __dirname: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-restricted-syntax': [
        'error',
        { selector: 'TSEnumDeclaration', message: 'Use `as const` tuples or objects (STYLE.md).' },
      ],
      // Type-only imports are erased and never form a cycle at run time.
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
    },
  },
  {
    // Type-aware rules on TypeScript only: the project service costs a program per tsconfig, not per file.
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: { '@typescript-eslint/no-floating-promises': 'error' },
  },
  {
    // Drizzle tables reference each other for foreign keys (and relations): the only cycles allowed.
    files: ['db/schema/**/*.ts'],
    rules: { 'import-x/no-cycle': 'off' },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // The pure decisions: functions of (state, now) that workflows and activities share. Nothing with
    // effects, not even a clock: only schemas/ and core/ itself.
    files: ['core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(?!\\./[^./]|\\.\\./schemas/)',
              message:
                'core/ imports only ../schemas/* and ./*: no Node built-ins, Temporal, db, api, activities or workflows.',
            },
          ],
        },
      ],
    },
  },
  {
    // Workflow code is deterministic: no Node built-ins (STYLE.md). The folders it may import are fenced with
    // every other row of §2.2 below; activities come in as `import type` only.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'net', 'http', 'child_process', 'crypto', 'os', 'path'],
              message: 'workflows/ must stay deterministic.',
            },
            ...direction.typeOnlyPatterns('workflows/'),
          ],
        },
      ],
    },
  },
  {
    // Dependency direction (docs/architecture.md §2.2): one zone per row of the table in
    // dependency-direction.cjs, on resolved paths. Tests beside the code are harnesses, like test/.
    ignores: direction.HARNESS_FILES,
    rules: {
      'import-x/no-restricted-paths': ['error', { zones: direction.restrictedPathZones(import.meta.dirname) }],
    },
  },
  {
    // lib/ is the shared leaf under api/ and supervisor/: Node built-ins and its own files, nothing else.
    files: ['lib/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^(?!node:|\\./)', message: 'lib/ imports only node: built-ins and lib/.' }] },
      ],
    },
  },
);
