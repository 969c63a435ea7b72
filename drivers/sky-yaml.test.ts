import { parse } from 'yaml';
import type { Domain } from '../schemas/entities';
import { infraOf, renderDomainYaml, renderServiceYaml, renderTaskYaml, RenderError, skyNameFor } from './sky-yaml';

const domain = (over: Partial<Domain> = {}): Domain => ({
  id: '40000000-0000-4000-8000-00000000000a',
  fleetId: '40000000-0000-4000-8000-000000000001',
  slug: 'aws-use1',
  displayName: 'AWS us-east-1',
  provider: 'skypilot',
  placement: { cloud: 'aws', region: 'us-east-1', accelerators: 'H100:2', useSpot: false },
  supervisorUrl: 'https://aws-use1.gpu.example.com:8701',
  servingBaseUrl: 'https://aws-use1.gpu.example.com',
  launch: {
    setup: "pip install 'vllm>=0.10'\nnpm ci --omit=dev",
    run: 'examples/vllm-launch.sh 0 8001 qwen-0.5b Qwen/Qwen2.5-0.5B-Instruct &\nexec node bin/haru.js supervisor',
    envs: { HARU_GPU_VENDOR: 'nvidia', HARU_SUPERVISOR_HOST: '0.0.0.0' },
    ports: [8701, 443],
  },
  state: 'provisioning',
  stateChangedAt: '2026-01-01T00:00:00.000Z',
  lastSeenAt: null,
  consecutiveFailures: 0,
  lastError: null,
  ...over,
});

describe('SkyPilot task YAML', () => {
  it('renders name, resources from the placement, envs, setup and run for a skypilot domain', () => {
    expect(renderTaskYaml({ domain: domain(), fleetSlug: 'prod' })).toMatchInlineSnapshot(`
     "name: haru-prod-aws-use1
     resources:
       infra: aws/us-east-1
       accelerators: H100:2
       use_spot: false
       ports:
         - 443
         - 8701
     envs:
       HARU_FLEET: "prod"
       HARU_DOMAIN: "aws-use1"
       HARU_DOMAIN_ID: "40000000-0000-4000-8000-00000000000a"
       HARU_GPU_VENDOR: "nvidia"
       HARU_SUPERVISOR_HOST: "0.0.0.0"
     setup: |-
       pip install 'vllm>=0.10'
       npm ci --omit=dev
     run: |-
       examples/vllm-launch.sh 0 8001 qwen-0.5b Qwen/Qwen2.5-0.5B-Instruct &
       exec node bin/haru.js supervisor
     "
    `);
  });

  it('opens only the supervisor port when the launch spec names none, and pins no cloud when the placement has none', () => {
    const doc = parse(
      renderTaskYaml({
        domain: domain({ placement: {}, launch: { run: 'haru supervisor' } }),
        fleetSlug: 'dev',
      }),
    );
    expect(doc.resources).toEqual({ ports: [8701] });
    expect(doc.setup).toBeUndefined();
    expect(doc.envs).toEqual({
      HARU_FLEET: 'dev',
      HARU_DOMAIN: 'aws-use1',
      HARU_DOMAIN_ID: '40000000-0000-4000-8000-00000000000a',
    });
  });

  it('writes spot and zone placements in SkyPilot infra syntax', () => {
    expect(infraOf({ cloud: 'gcp' })).toBe('gcp');
    expect(infraOf({ cloud: 'gcp', region: 'us-central1', zone: 'us-central1-a' })).toBe(
      'gcp/us-central1/us-central1-a',
    );
    expect(infraOf({ cloud: 'aws', zone: 'us-east-1a' })).toBe('aws/*/us-east-1a');
    // A region without a cloud: any cloud that has it (sky/utils/infra_utils.py InfraInfo.from_str reads
    // `*` as "any" in each part).
    expect(infraOf({ region: 'us-east-1' })).toBe('*/us-east-1');
    expect(infraOf({ zone: 'us-east-1a' })).toBe('*/*/us-east-1a');
    expect(infraOf({})).toBeUndefined();
    const doc = parse(
      renderTaskYaml({ domain: domain({ placement: { cloud: 'aws', useSpot: true } }), fleetSlug: 'p' }),
    );
    expect(doc.resources).toMatchObject({ infra: 'aws', use_spot: true });
  });

  it('never renders a secret: no token appears in the YAML, nor the launch spec secrets', () => {
    const yaml = renderTaskYaml({
      domain: domain({ launch: { ...domain().launch!, secrets: ['HF_TOKEN'] } }),
      fleetSlug: 'prod',
    });
    expect(yaml).not.toMatch(/TOKEN/);
    expect(parse(yaml).secrets).toBeUndefined();
  });

  it('ships the workdir and sets the image (a cloud image or docker:<image>)', () => {
    const doc = parse(
      renderTaskYaml({
        domain: domain({ launch: { ...domain().launch!, workdir: '.', imageId: 'docker:vllm/vllm-openai:v0.10.1' } }),
        fleetSlug: 'prod',
      }),
    );
    expect(doc.workdir).toBe('.');
    expect(doc.resources.image_id).toBe('docker:vllm/vllm-openai:v0.10.1');
    expect(Object.keys(doc)).toEqual(['name', 'resources', 'envs', 'workdir', 'setup', 'run']);
  });

  it('quotes env values, which YAML 1.1 readers would otherwise turn into booleans or numbers', () => {
    const yaml = renderTaskYaml({
      domain: domain({ launch: { run: 'x', envs: { ENABLED: 'yes', WHEN: '1:30', PORT: '8001' } } }),
      fleetSlug: 'p',
    });
    expect(yaml).toContain('ENABLED: "yes"');
    expect(yaml).toContain('WHEN: "1:30"');
    expect(parse(yaml).envs).toMatchObject({ ENABLED: 'yes', WHEN: '1:30', PORT: '8001' });
  });

  it('refuses a static domain and a domain without a launch spec', () => {
    expect(() => renderTaskYaml({ domain: domain({ provider: 'static' }), fleetSlug: 'p' })).toThrow(RenderError);
    expect(() => renderTaskYaml({ domain: domain({ launch: null }), fleetSlug: 'p' })).toThrow(/no launch spec/);
  });
});

describe('SkyServe service YAML', () => {
  const serve = (over: Partial<Domain> = {}) => domain({ provider: 'skyserve', slug: 'serve-east', ...over });

  it('renders the service section (readiness probe, replicas, service port) ahead of the task fields', () => {
    const d = serve({ launch: { ...domain().launch!, replicas: 1 } });
    expect(renderServiceYaml({ domain: d, fleetSlug: 'prod' })).toMatchInlineSnapshot(`
     "name: haru-prod-serve-east
     service:
       ports: 8701
       readiness_probe:
         path: /healthz
         initial_delay_seconds: 1200
       replicas: 1
     resources:
       infra: aws/us-east-1
       accelerators: H100:2
       use_spot: false
       ports:
         - 443
         - 8701
     envs:
       HARU_FLEET: "prod"
       HARU_DOMAIN: "serve-east"
       HARU_DOMAIN_ID: "40000000-0000-4000-8000-00000000000a"
       HARU_GPU_VENDOR: "nvidia"
       HARU_SUPERVISOR_HOST: "0.0.0.0"
     setup: |-
       pip install 'vllm>=0.10'
       npm ci --omit=dev
     run: |-
       examples/vllm-launch.sh 0 8001 qwen-0.5b Qwen/Qwen2.5-0.5B-Instruct &
       exec node bin/haru.js supervisor
     "
    `);
  });

  it('probes vLLM-style /health on a service port other than the supervisor, and opens that port', () => {
    const d = serve({ launch: { run: 'start.sh', ports: [8701], service: { port: 8001, initialDelaySeconds: 300 } } });
    const doc = parse(renderServiceYaml({ domain: d, fleetSlug: 'prod' }));
    expect(doc.service).toEqual({
      ports: 8001,
      readiness_probe: { path: '/health', initial_delay_seconds: 300 },
      replicas: 1,
    });
    expect(doc.resources.ports).toEqual([8001, 8701]);
  });

  it('refuses more than one replica (a row stored before the layout refused it), saying why', () => {
    const d = serve({ launch: { ...domain().launch!, replicas: 2 } });
    expect(() => renderServiceYaml({ domain: d, fleetSlug: 'prod' })).toThrow(
      /replicas must be 1: a domain has one supervisor/,
    );
  });

  it('picks the renderer from the provider', () => {
    expect(parse(renderDomainYaml({ domain: serve(), fleetSlug: 'p' })).service).toBeDefined();
    expect(parse(renderDomainYaml({ domain: domain(), fleetSlug: 'p' })).service).toBeUndefined();
  });
});

it('names clusters and services haru-<fleet>-<domain>', () => {
  expect(skyNameFor('prod', 'aws-use1')).toBe('haru-prod-aws-use1');
});
