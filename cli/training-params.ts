import { BadInputError } from './exit-codes';

/** A trainer parameter's value as the API takes it; the template's declaration decides which type fits. */
export type ParamValue = string | number | boolean;

const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * One `--param name=value`: `true`/`false` are booleans, a JSON number is a number, a JSON string in double
 * quotes is that string (`--param 'tag="16"'` for a string that looks like a number), anything else the text
 * as written. The API checks the value against the template and names the parameter when it does not fit.
 * Throws BadInputError without `=` or a name.
 */
export function parseParam(arg: string): [string, ParamValue] {
  const eq = arg.indexOf('=');
  if (eq <= 0) throw new BadInputError(`--param ${arg}: write name=value`);
  const name = arg.slice(0, eq);
  const text = arg.slice(eq + 1);
  if (text === 'true' || text === 'false') return [name, text === 'true'];
  if (NUMBER.test(text)) return [name, Number(text)];
  if (text.length >= 2 && text.startsWith('"') && text.endsWith('"')) {
    try {
      return [name, JSON.parse(text) as string];
    } catch {
      throw new BadInputError(`--param ${arg}: the quoted value is not a JSON string`);
    }
  }
  return [name, text];
}

/** Every `--param` of a command line as one object; a name given twice is refused (BadInputError). */
export function paramsOf(args: readonly string[]): Record<string, ParamValue> {
  const params: Record<string, ParamValue> = {};
  for (const arg of args) {
    const [name, value] = parseParam(arg);
    if (Object.hasOwn(params, name)) throw new BadInputError(`--param ${name} is given twice`);
    params[name] = value;
  }
  return params;
}
