import { createKeyedSerializer } from './serial';

describe('keyed serializer', () => {
  it('runs tasks of one key in order without overlap, other keys in parallel, and survives failures', async () => {
    const serial = createKeyedSerializer<number>();
    const events: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const first = serial(0, async () => {
      events.push('a start');
      await gate;
      events.push('a end');
      throw new Error('a failed');
    });
    const second = serial(0, async () => {
      events.push('b');
      return 'b';
    });
    const other = serial(1, async () => {
      events.push('other');
      return 'other';
    });
    expect(await other).toBe('other');
    expect(events).toEqual(['a start', 'other']); // key 1 did not wait for key 0
    release();
    await expect(first).rejects.toThrow('a failed');
    expect(await second).toBe('b');
    expect(events).toEqual(['a start', 'other', 'a end', 'b']);
  });
});
