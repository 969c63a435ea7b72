import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createPidTranslator, inPidSpace, INIT_PID_NAMESPACE, parseNsPid } from './pid-namespace';
import type { GpuReading } from './types';

// /proc/<pid>/status of a process in a container, read from the host's /proc (Linux 6.x): host pid 12064, 10
// in the container's namespace.
const STATUS_FROM_HOST = `Name:\tnode
Umask:\t0022
State:\tS (sleeping)
Tgid:\t12064
Ngid:\t0
Pid:\t12064
PPid:\t12051
TracerPid:\t0
Uid:\t0\t0\t0\t0
Gid:\t0\t0\t0\t0
NStgid:\t12064\t10
NSpid:\t12064\t10
NSpgid:\t12051\t1
NSsid:\t12051\t1
`;

describe('parseNsPid', () => {
  it("reads a process's pid in each namespace, outermost first", () => {
    expect(parseNsPid(STATUS_FROM_HOST)).toEqual([12064, 10]);
    expect(parseNsPid('Name:\tbash\nNSpid:\t4242\n')).toEqual([4242]);
  });

  it('gives null without the line (kernels before 4.1) or with garbage in it', () => {
    expect(parseNsPid('Name:\tbash\nPid:\t4242\n')).toBeNull();
    expect(parseNsPid('NSpid:\tx\n')).toBeNull();
  });
});

describe('createPidTranslator', () => {
  const made: string[] = [];
  afterAll(() => made.forEach((d) => rmSync(d, { recursive: true, force: true })));
  /** A /proc whose self/ns/pid link reads `ns`. */
  const procWithNs = (ns: string) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-proc-'));
    made.push(dir);
    mkdirSync(path.join(dir, 'self', 'ns'), { recursive: true });
    symlinkSync(ns, path.join(dir, 'self', 'ns', 'pid'));
    return dir;
  };
  const reading = (pids: number[]): GpuReading => ({
    index: 0,
    uuid: 'GPU-0',
    usedMiB: 10,
    totalMiB: 100,
    processes: pids.map((pid) => ({ pid, usedMiB: 5 })),
    source: 'device',
    migDevice: null,
    error: null,
  });

  it("leaves the initial namespace's pids as they are", () => {
    const translator = createPidTranslator({ proc: procWithNs(INIT_PID_NAMESPACE) })();
    expect(translator.space).toBe('own');
    expect(inPidSpace([reading([7])], translator)).toEqual([reading([7])]);
  });

  it("marks every pid foreign in a container's namespace without the host's /proc", () => {
    const translator = createPidTranslator({ proc: procWithNs('pid:[4026532180]') })();
    expect(inPidSpace([reading([7])], translator)).toEqual([
      { ...reading([]), pidSpace: 'unmapped', processes: [{ pid: 7, usedMiB: 5, foreign: true }] },
    ]);
  });

  it('refuses a HARU_HOST_PROC that is not an ancestor namespace’s /proc showing this process', () => {
    const translator = createPidTranslator({ proc: procWithNs('pid:[4026532180]'), hostProc: '/proc' });
    expect(() => translator()).toThrow(/HARU_HOST_PROC=\/proc is not the host's \/proc/);
  });
});
