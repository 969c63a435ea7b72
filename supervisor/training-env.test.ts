import { buildTrainingEnv, SUPERVISOR_SECRET_ENV } from './training-env';

const SUPERVISOR_ENV = {
  PATH: '/usr/local/bin:/usr/bin',
  HOME: '/root',
  LANG: 'C.UTF-8',
  LC_ALL: 'C.UTF-8',
  TZ: 'UTC',
  LD_LIBRARY_PATH: '/usr/local/cuda/lib64',
  HARU_SUPERVISOR_TOKEN: 'supervisor-token',
  HARU_SUPERVISOR_TOKEN_FILE: '/run/credentials/haru-supervisor.service/token',
  HARU_SUPERVISOR_CONFIG: '/etc/haru/supervisor.json',
  AWS_SECRET_ACCESS_KEY: 'cloud-key',
  DATABASE_URL: 'postgres://haru:pw@db/haru',
  HARU_VLLM_API_KEY: 'vllm-key',
  PYTHONPATH: '/opt/somewhere',
};

const slot = { gpuIndex: 1, command: ['train'], checkpointDir: '/ckpt' };

describe('a trainer’s environment', () => {
  it('inherits only the base variables from the supervisor, plus the trainer contract', () => {
    expect(buildTrainingEnv(SUPERVISOR_ENV, slot, '/abs/ckpt')).toEqual({
      PATH: '/usr/local/bin:/usr/bin',
      HOME: '/root',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      TZ: 'UTC',
      LD_LIBRARY_PATH: '/usr/local/cuda/lib64',
      HARU_CHECKPOINT_DIR: '/abs/ckpt',
      HARU_GPU_INDEX: '1',
      HARU_TRAINING_PROGRESS_FILE: '/abs/ckpt/.haru-training-progress.json',
      CUDA_VISIBLE_DEVICES: '1',
      CUDA_DEVICE_ORDER: 'PCI_BUS_ID',
    });
  });

  it('adds the slot’s own env, which cannot override the contract or bring the supervisor’s secrets back', () => {
    const env = buildTrainingEnv(
      SUPERVISOR_ENV,
      {
        ...slot,
        mig: 'MIG-1',
        env: {
          HF_HOME: '/data/hf',
          PYTHONPATH: '/opt/trainer',
          HARU_SUPERVISOR_TOKEN: 'smuggled',
          HARU_GPU_INDEX: '0',
          CUDA_VISIBLE_DEVICES: '0,1',
        },
      },
      '/abs/ckpt',
    );
    expect(env).toMatchObject({
      HF_HOME: '/data/hf',
      PYTHONPATH: '/opt/trainer',
      HARU_GPU_INDEX: '1',
      CUDA_VISIBLE_DEVICES: 'MIG-1',
    });
    for (const name of SUPERVISOR_SECRET_ENV) expect(env).not.toHaveProperty(name);
  });

  it('gives a runAs trainer its own HOME, USER and LOGNAME', () => {
    const user = { name: 'trainer', uid: 1001, gid: 1001, home: '/home/trainer' };
    expect(buildTrainingEnv(SUPERVISOR_ENV, slot, '/abs/ckpt', user)).toMatchObject({
      HOME: '/home/trainer',
      USER: 'trainer',
      LOGNAME: 'trainer',
    });
  });
});
