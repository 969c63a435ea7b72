import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { configPath, loadConfigFile, saveConfigFile, tokenFilePath } from './config-file';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-config-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const write = (content: unknown, mode = 0o600) => {
  const file = path.join(dir, 'config.json');
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  chmodSync(file, mode);
  return file;
};

describe('configPath', () => {
  it('is $HARU_CONFIG, else under $XDG_CONFIG_HOME, else under ~/.config', () => {
    expect(configPath({ HARU_CONFIG: '/etc/haru.json', XDG_CONFIG_HOME: '/x', HOME: '/h' })).toBe('/etc/haru.json');
    expect(configPath({ HARU_CONFIG: ' ', XDG_CONFIG_HOME: '/x', HOME: '/h' })).toBe('/x/haru/config.json');
    expect(configPath({ HOME: '/h' })).toBe('/h/.config/haru/config.json');
  });
});

describe('loadConfigFile', () => {
  it('reads no file as an empty config', () => {
    expect(loadConfigFile(path.join(dir, 'none.json')).config).toEqual({ contexts: {} });
  });

  it('names the file and the JSON path of each problem', () => {
    const file = write({ currentContext: 'prod', contexts: { prod: { server: 'ftp://x', tokenFlie: 'f' } } });
    expect(() => loadConfigFile(file)).toThrow(
      expect.objectContaining({
        name: 'ConfigError',
        message: expect.stringMatching(
          new RegExp(
            `^invalid config file ${file}:\\n {2}contexts\\.prod\\.server: must be an http\\(s\\) URL\\n {2}contexts\\.prod: .*tokenFlie`,
          ),
        ),
      }),
    );
  });

  it('refuses a current context that names no context, and a file that is not JSON', () => {
    expect(() => loadConfigFile(write({ currentContext: 'gone', contexts: {} }))).toThrow(
      /currentContext: names no context/,
    );
    expect(() => loadConfigFile(write('{ "contexts": '))).toThrow(/config\.json: not JSON/);
  });

  it('refuses a file holding a token that group or others may read, and reads it at mode 600', () => {
    const config = { currentContext: 'prod', contexts: { prod: { server: 'https://haru.example', token: 's3cret' } } };
    expect(() => loadConfigFile(write(config, 0o644))).toThrow(
      /^config file \(it holds a token\): .*config\.json is open to group or others \(mode 0644\); chmod 600 it$/,
    );
    expect(loadConfigFile(write(config, 0o600)).config.contexts.prod!.token).toBe('s3cret');
  });

  it('reads a file without a token whatever its mode (a token file holds the secret)', () => {
    const loaded = loadConfigFile(write({ contexts: { prod: { tokenFile: 'prod.token' } } }, 0o644));
    expect(tokenFilePath(loaded, loaded.config.contexts.prod!)).toBe(path.join(dir, 'prod.token'));
  });
});

describe('saveConfigFile', () => {
  it('writes the file at mode 600, creating its folder at 700', () => {
    const file = path.join(dir, 'haru', 'config.json');
    saveConfigFile(file, { currentContext: 'a', contexts: { a: { server: 'https://a.example' } } });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({
      currentContext: 'a',
      contexts: { a: { server: 'https://a.example' } },
    });
  });
});
