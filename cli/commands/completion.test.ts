import { execFileSync } from 'node:child_process';
import { runCli } from '../../test/support/cli';

/** What bash completes after `words` (the last one being typed), with the script `haru completion bash` prints. */
function complete(script: string, words: string[]): string[] {
  const array = ['haru', ...words].map((w) => `'${w}'`).join(' ');
  const out = execFileSync(
    'bash',
    [
      '-c',
      `${script}\nCOMP_WORDS=(${array}); COMP_CWORD=${words.length}; _haru_complete; printf '%s\\n' "\${COMPREPLY[@]}"`,
    ],
    { encoding: 'utf8' },
  );
  return out.split('\n').filter(Boolean);
}

describe('haru completion', () => {
  let script: string;
  beforeAll(async () => {
    const run = await runCli(['completion', 'bash']);
    expect(run.code).toBe(0);
    script = run.stdout;
  });

  it('completes commands, subcommands and their options, past positional arguments', () => {
    expect(complete(script, ['fl'])).toEqual(['fleet']);
    expect(complete(script, ['fleet', 'st'])).toEqual(['status']);
    expect(complete(script, ['fleet', 'status', 'dev', '--o'])).toEqual(['--output']);
    expect(complete(script, ['fleet', 'events', 'dev', '--f'])).toEqual(['--follow']);
  });

  it('refuses a shell it has no script for, in one line', async () => {
    const run = await runCli(['completion', 'fish']);
    expect(run.code).not.toBe(0);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });
});
