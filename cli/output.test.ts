import { formatOf, isData, isWide, renderData, renderStreamItem } from './output';

describe('output formats', () => {
  it('reads --json alone as json, -o as named, nothing as table', () => {
    expect(formatOf({})).toBe('table');
    expect(formatOf({ json: true })).toBe('json');
    expect(formatOf({ json: true, output: 'yaml' })).toBe('yaml');
    expect(formatOf({ json: false, output: 'wide' })).toBe('wide');
    expect([isData({ output: 'yaml' }), isData({ output: 'wide' }), isWide({ output: 'wide' })]).toEqual([
      true,
      false,
      true,
    ]);
  });

  it('prints data as indented JSON, or as YAML with -o yaml', () => {
    const value = { fleet: 'prod', domains: ['a', 'b'] };
    expect(JSON.parse(renderData(value, { json: true }))).toEqual(value);
    expect(renderData(value, { output: 'yaml' })).toBe('fleet: prod\ndomains:\n  - a\n  - b');
  });

  it('streams one JSON line per value, or one YAML document per value', () => {
    expect(renderStreamItem({ id: 1 }, { json: true })).toBe('{"id":1}');
    expect(renderStreamItem({ id: 1 }, { output: 'yaml' })).toBe('---\nid: 1');
  });
});
