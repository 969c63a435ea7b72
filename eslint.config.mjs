import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', '.haru/', 'dist/', 'db/migrations/', 'coverage/', '.stryker-tmp/', 'reports/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
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
    },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Workflow code is deterministic: no Node built-ins, no db, no activity implementations (STYLE.md).
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
            {
              group: ['../db/*', '../../db/*', '../api/*', '../../api/*'],
              message: 'workflows/ never imports db or api.',
            },
            {
              group: ['../activities/*', '../../activities/*'],
              message: 'import activities as `import type` only.',
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  {
    // The supervisor ships alone to GPU hosts: it imports only schemas/ and lib/.
    files: ['supervisor/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                '../db/*',
                '../api/*',
                '../workflows/*',
                '../activities/*',
                '../workers/*',
                '../sim/*',
                '../cli/*',
              ],
              message: 'supervisor/ imports only schemas/ and lib/.',
            },
          ],
        },
      ],
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
