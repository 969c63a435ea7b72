import { writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Writes nginx's main file for a test under `dir` (every path nginx writes is there: no root needed), with
 * `http` as the body of its `http {}` block. Returns the file and the arguments that run nginx on it.
 */
export function writeNginxMain(dir: string, http: string): { main: string; errorLog: string; args: string[] } {
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .map((t) => `${t}_temp_path ${path.join(dir, `${t}-temp`)};`)
    .join('\n  ');
  const main = path.join(dir, 'nginx.conf');
  const errorLog = path.join(dir, 'error.log');
  writeFileSync(
    main,
    [
      'daemon off;',
      'worker_processes 1;',
      `pid ${path.join(dir, 'nginx.pid')};`,
      `error_log ${errorLog} warn;`,
      'events {}',
      `http {\n  access_log off;\n  ${temp}\n  ${http}\n}`,
      '',
    ].join('\n'),
  );
  return { main, errorLog, args: ['-p', dir, '-e', errorLog, '-c', main] };
}
