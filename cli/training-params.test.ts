import { BadInputError } from './exit-codes';
import { paramsOf, parseParam } from './training-params';

describe('parseParam', () => {
  it.each([
    ['rank=16', ['rank', 16]],
    ['learningRate=1e-4', ['learningRate', 0.0001]],
    ['delta=-0.5', ['delta', -0.5]],
    ['packing=true', ['packing', true]],
    ['packing=false', ['packing', false]],
    ['optimizer=adamw', ['optimizer', 'adamw']],
    ['tag="16"', ['tag', '16']],
    ['prompt=a=b', ['prompt', 'a=b']],
    ['empty=', ['empty', '']],
    ['version=1.2.3', ['version', '1.2.3']],
    ['id=007', ['id', '007']],
  ])('reads %s', (arg, expected) => {
    expect(parseParam(arg)).toEqual(expected);
  });

  it.each(['rank', '=16', 'tag="unterminated\\"'])('refuses %s as bad input', (arg) => {
    expect(() => parseParam(arg)).toThrow(BadInputError);
  });
});

describe('paramsOf', () => {
  it('gathers every --param into one object', () => {
    expect(paramsOf(['rank=16', 'optimizer=adamw'])).toEqual({ rank: 16, optimizer: 'adamw' });
    expect(paramsOf([])).toEqual({});
  });

  it('refuses a name given twice', () => {
    expect(() => paramsOf(['rank=16', 'rank=32'])).toThrow('--param rank is given twice');
  });
});
