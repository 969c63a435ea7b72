import type { SupervisorConfig } from '../schemas/supervisor';
import { renderTrainerFirewall, trainerFirewallOf } from './trainer-firewall';

const config: SupervisorConfig = {
  inference: [
    {
      gpuIndex: 0,
      sleepLevel: 1,
      models: [
        { name: 'a', port: 8002 },
        { name: 'b', port: 8001 },
      ],
    },
    { gpuIndex: 1, sleepLevel: 1, models: [{ name: 'c', port: 8003 }] },
  ],
  training: [],
};
const user = (uid: number) => ({ name: `u${uid}`, uid, gid: uid, home: '/' });

it('keeps the runAs users off every model port and the supervisor, each once, in order', () => {
  const rules = trainerFirewallOf(
    config,
    8701,
    new Map([
      [0, user(1002)],
      [1, user(1001)],
      [2, user(1002)],
    ]),
  );
  expect(rules).toEqual({ uids: [1001, 1002], ports: [8001, 8002, 8003, 8701] });
  expect(renderTrainerFirewall(rules)).toContain(
    'oifname "lo" meta skuid { 1001, 1002 } tcp dport { 8001, 8002, 8003, 8701 } reject with tcp reset',
  );
});

it('replaces the table whole, and leaves none when no trainer runs as another user', () => {
  const script = renderTrainerFirewall({ uids: [1001], ports: [8001] });
  const statements = script.split('\n').filter((l) => l && !l.startsWith('#'));
  expect(statements.slice(0, 3)).toEqual([
    'table inet haru_trainers',
    'delete table inet haru_trainers',
    'table inet haru_trainers {',
  ]);
  expect(renderTrainerFirewall(trainerFirewallOf(config, 8701, new Map()))).not.toMatch(/skuid|\{/);
});
