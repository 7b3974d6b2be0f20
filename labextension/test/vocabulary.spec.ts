/**
 * The shared vocabulary against tests/vocabulary.json, the one table of the words and numbers
 * people read (the Python vocabulary is tested against it too). jest.config.js sets TZ=UTC.
 */

import table from '../../tests/vocabulary.json';
import * as vocabulary from '../src/vocabulary';

type Case = [unknown[], string];

const TABLE = table as unknown as Record<string, Case[]>;
const FUNCTIONS = Object.keys(TABLE).filter(name => !name.startsWith('_'));

describe.each(FUNCTIONS)('%s', name => {
  const fn = (vocabulary as unknown as Record<string, (...args: unknown[]) => string>)[name];

  it('exists in the shared vocabulary', () => {
    expect(typeof fn).toBe('function');
  });

  it.each(TABLE[name].map(([args, want]) => [JSON.stringify(args), args, want]))('%s', (_, args, want) => {
    expect(fn(...(args as unknown[]))).toBe(want);
  });
});

it('reads every word through the translator it is given', () => {
  const upper = { __: (msgid: string, ...args: unknown[]) => vocabulary.english.__(msgid.toUpperCase(), ...args) };
  expect(vocabulary.duration(65, upper)).toBe('1 MIN 5 S');
  expect(vocabulary.stateWord('Pending', 'inadmissible', upper)).toBe('CANNOT START');
  expect(vocabulary.barText({ resource: 'memory', used: 2 ** 30, min: 0, max: 2 ** 31, borrowed: 2 ** 30 }, upper))
    .toBe('MEMORY 1 GIB/0 GIB (+1 GIB BORROWED) OF 2 GIB');
});
