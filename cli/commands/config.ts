import path from 'node:path';
import type { Command } from 'commander';
import {
  type HaruConfig,
  type HaruContext,
  configPath,
  contextNameSchema,
  loadConfigFile,
  saveConfigFile,
} from '../config-file';
import { BadInputError } from '../exit-codes';
import { isData, type OutputOptions, renderData } from '../output';
import { table } from '../format';

const out = (text: string): void => {
  process.stdout.write(`${text}\n`);
};
const fileOf = () => configPath(process.env);

/** A context's name from the command line, refused (exit 2) when it is not one a config file may hold. */
function contextName(name: string): string {
  const parsed = contextNameSchema.safeParse(name);
  if (!parsed.success)
    throw new BadInputError(`context name ${JSON.stringify(name)}: ${parsed.error.issues[0]!.message}`);
  return parsed.data;
}

/** How a context gets its token, as `get-contexts` shows it: never the token itself. */
const tokenOf = (c: HaruContext) => (c.tokenFile ? `file ${c.tokenFile}` : c.token ? 'inline' : null);

interface SetContextOptions {
  server?: string;
  tokenFile?: string;
  insecureHttp?: boolean;
  current?: boolean;
}

/** `set-context`: the named context created or changed (only the settings given), optionally made current. */
export function withContext(config: HaruConfig, name: string, opts: SetContextOptions): HaruConfig {
  const before = config.contexts[name] ?? {};
  const context: HaruContext = {
    ...before,
    ...(opts.server !== undefined ? { server: opts.server } : {}),
    // A token file replaces an inline token: a context holds one or the other.
    // A path typed on the command line means from here, not from the config file's folder: stored absolute.
    ...(opts.tokenFile !== undefined ? { tokenFile: path.resolve(opts.tokenFile), token: undefined } : {}),
    ...(opts.insecureHttp !== undefined ? { insecureHttp: opts.insecureHttp } : {}),
  };
  return {
    ...config,
    contexts: { ...config.contexts, [name]: JSON.parse(JSON.stringify(context)) as HaruContext },
    ...(opts.current || config.currentContext === undefined ? { currentContext: name } : {}),
  };
}

/** `haru config use-context|set-context|get-contexts|current-context`: the config file ($HARU_CONFIG). */
export function register(program: Command): void {
  const config = program
    .command('config')
    .description(
      'contexts in the config file ($HARU_CONFIG, else ~/.config/haru/config.json): which API and token the commands use',
    );

  config
    .command('get-contexts')
    .description('list the contexts, the current one marked with *')
    .option('--json', 'print JSON (tokens are never printed)')
    .action((opts: OutputOptions) => {
      const { config: file } = loadConfigFile(fileOf());
      const rows = Object.entries(file.contexts).map(([name, c]) => ({
        name,
        isCurrent: name === file.currentContext,
        server: c.server ?? null,
        token: tokenOf(c),
        insecureHttp: c.insecureHttp ?? false,
      }));
      if (isData(opts)) return out(renderData(rows, opts));
      out(
        table(
          ['CURRENT', 'NAME', 'SERVER', 'TOKEN'],
          rows.map((r) => [r.isCurrent ? '*' : '', r.name, r.server, r.token]),
        ),
      );
    });

  config
    .command('current-context')
    .description('print the current context')
    .action(() => {
      const loaded = loadConfigFile(fileOf());
      if (!loaded.config.currentContext) throw new BadInputError(`no current context in ${loaded.file}`);
      out(loaded.config.currentContext);
    });

  config
    .command('use-context <name>')
    .description('make <name> the current context')
    .action((name: string) => {
      const loaded = loadConfigFile(fileOf());
      if (!(contextName(name) in loaded.config.contexts))
        throw new BadInputError(`no context ${name} in ${loaded.file}`);
      saveConfigFile(loaded.file, { ...loaded.config, currentContext: name });
      out(`switched to context ${name}`);
    });

  config
    .command('set-context <name>')
    .description('create or change a context (only the settings given); the first one becomes current')
    .option('--server <url>', "the Haru API's base URL")
    .option('--token-file <file>', 'a file holding the API token, mode 600 (stored as an absolute path)')
    .option('--insecure-http', 'allow the token over plain http:// off loopback (a trusted network only)')
    .option('--current', 'also make it the current context')
    .action((name: string, _local: SetContextOptions, cmd: Command) => {
      // The program's own --server and --insecure-http take these words wherever they stand: read both levels.
      const opts = cmd.optsWithGlobals<SetContextOptions>();
      const loaded = loadConfigFile(fileOf());
      const next = withContext(loaded.config, contextName(name), opts);
      try {
        saveConfigFile(loaded.file, next);
      } catch (err) {
        // A bad --server reaches us as the schema's refusal: say which setting, not a stack of zod issues.
        if (err instanceof Error && err.name === 'ZodError') throw new BadInputError(`--server must be an http(s) URL`);
        throw err;
      }
      out(`context ${name} ${name in loaded.config.contexts ? 'changed' : 'created'} in ${loaded.file}`);
    });
}
