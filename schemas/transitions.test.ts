import {
  ALL_TRANSITION_TABLES,
  assertTransition,
  canTransition,
  InvalidTransitionError,
  predecessorsOf,
} from './transitions';

describe.each(Object.entries(ALL_TRANSITION_TABLES))('%s transition table', (machine, { table, states }) => {
  const t = table as Record<string, readonly string[]>;
  it('has an entry for every state and only known targets', () => {
    expect(Object.keys(t).sort()).toEqual([...states].sort());
    for (const targets of Object.values(t)) for (const to of targets) expect(states).toContain(to);
  });
  const pairs = states.flatMap((from) => states.map((to) => [from, to] as const));
  it.each(pairs)('%s -> %s is allowed exactly when the table lists it', (from, to) => {
    const listed = t[from]!.includes(to);
    expect(canTransition(t, from, to)).toBe(listed);
    if (listed) expect(() => assertTransition(machine, t, from, to)).not.toThrow();
    else expect(() => assertTransition(machine, t, from, to)).toThrow(InvalidTransitionError);
    expect(predecessorsOf(t, to).includes(from)).toBe(listed);
  });
});

it('operations never leave a terminal state', () => {
  const { table } = ALL_TRANSITION_TABLES.operation;
  for (const terminal of ['succeeded', 'failed', 'cancelled'] as const) expect(table[terminal]).toEqual([]);
});
