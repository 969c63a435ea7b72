import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  parseEndpoint,
  parseServeStatus,
  parseStatusJson,
  parseStatusTable,
  readTable,
  saysNotFound,
  UnparseableOutputError,
} from './sky-output';

const fixture = (name: string) => readFileSync(path.join(__dirname, '../test/fixtures/sky', name), 'utf8');

describe('sky status (table)', () => {
  it('reads each cluster at the header offsets, keeping values that contain spaces whole', () => {
    const text = fixture('status-table.txt');
    expect(parseStatusTable(text, 'haru-prod-aws-use1')).toEqual({
      name: 'haru-prod-aws-use1',
      status: 'UP',
      infra: 'AWS (us-east-1)',
      resources: '1x(gpus=H100:2, cpus=52, mem=464, p5.4xlarge, ...)',
      autostop: null,
      launched: '2 hrs ago',
    });
    expect(parseStatusTable(text, 'haru-prod-gcp-usc1')?.status).toBe('INIT');
    expect(parseStatusTable(text, 'dev-box')).toMatchObject({
      status: 'STOPPED',
      infra: 'Kubernetes (kind-skypilot)',
      autostop: '10m (down)',
      launched: '5 days ago',
    });
  });

  it('reads the all-users form with a USER column and a hint after the table', () => {
    expect(parseStatusTable(fixture('status-table-all-users.txt'), 'haru-prod-aws-use1')).toMatchObject({
      status: 'UP',
      infra: 'AWS (us-east-1)',
      launched: '1 day ago',
    });
  });

  it('reads coloured output (forced colour) the same way', () => {
    expect(parseStatusTable(fixture('status-table-colored.txt'), 'haru-prod-aws-use1')).toMatchObject({
      status: 'UP',
      resources: '1x(gpus=H100:2, ...)',
      autostop: null,
    });
  });

  it('answers null for an unknown cluster: the not-found line, no clusters at all, or only other clusters', () => {
    expect(parseStatusTable(fixture('status-not-found.txt'), 'haru-prod-aws-use1')).toBeNull();
    expect(parseStatusTable(fixture('status-no-clusters.txt'), 'haru-prod-aws-use1')).toBeNull();
    expect(parseStatusTable(fixture('status-table.txt'), 'haru-prod-nowhere')).toBeNull();
  });

  it('refuses output that is neither a table nor a not-found line, and statuses it does not know', () => {
    expect(() => parseStatusTable('Traceback (most recent call last):\n  ...\n', 'x')).toThrow(UnparseableOutputError);
    const odd = fixture('status-table.txt').replace('UP     ', 'BOOTING');
    expect(() => parseStatusTable(odd, 'haru-prod-aws-use1')).toThrow(/unknown status "BOOTING"/);
  });
});

describe('sky status -o json', () => {
  it('reads the planned JSON form', () => {
    expect(parseStatusJson(fixture('status.json'), 'haru-prod-aws-use1')).toEqual({
      name: 'haru-prod-aws-use1',
      status: 'UP',
      infra: 'AWS/us-east-1',
      resources: "1x AWS(p5.4xlarge, {'H100': 2})",
      autostop: '60m (down)',
      launched: '2026-02-04T10:00:00Z',
    });
  });

  it('answers null for an unknown cluster and refuses what is not that JSON', () => {
    expect(parseStatusJson(fixture('status.json'), 'other')).toBeNull();
    expect(parseStatusJson('{"clusters": []}', 'other')).toBeNull();
    expect(() => parseStatusJson('Clusters\nNAME  STATUS\n', 'x')).toThrow(UnparseableOutputError);
    expect(() => parseStatusJson('{"items": []}', 'x')).toThrow(/clusters/);
  });
});

describe('sky serve status', () => {
  it('reads the service row and its replicas', () => {
    expect(parseServeStatus(fixture('serve-status-ready.txt'), 'haru-prod-serve-east')).toEqual({
      name: 'haru-prod-serve-east',
      status: 'READY',
      replicas: { ready: 2, total: 2 },
      endpoint: 'http://44.201.118.77:30001',
      replicaList: [
        { id: 1, status: 'READY', endpoint: 'http://3.85.12.9:8701', infra: 'AWS (us-east-1)' },
        { id: 2, status: 'READY', endpoint: 'http://54.90.1.20:8701', infra: 'AWS (us-east-1)' },
      ],
    });
  });

  it('reads a service whose replicas are still provisioning', () => {
    expect(parseServeStatus(fixture('serve-status-starting.txt'), 'haru-prod-serve-east')).toMatchObject({
      status: 'REPLICA_INIT',
      replicas: { ready: 0, total: 1 },
      replicaList: [{ id: 1, status: 'PROVISIONING', endpoint: null, infra: null }],
    });
  });

  it('answers null for an unknown service', () => {
    expect(parseServeStatus(fixture('serve-status-not-found.txt'), 'haru-prod-serve-east')).toBeNull();
    expect(parseServeStatus(fixture('serve-status-ready.txt'), 'haru-other')).toBeNull();
  });

  it('refuses anything else', () => {
    expect(() => parseServeStatus('Error: connection refused\n', 'x')).toThrow(UnparseableOutputError);
  });
});

describe('endpoints (sky status --endpoint, sky serve status --endpoint)', () => {
  it('reads host:port as an http URL and keeps a URL the CLI prints with its scheme', () => {
    expect(parseEndpoint('35.223.97.21:8701\n')).toBe('http://35.223.97.21:8701');
    expect(parseEndpoint('\u001b[0m10.0.0.7:8701\u001b[0m\n')).toBe('http://10.0.0.7:8701');
    expect(parseEndpoint('http://44.201.118.77:30001\n')).toBe('http://44.201.118.77:30001');
    expect(parseEndpoint('Hint: something\nhttp://ingress.example.com/skypilot/haru-p-a/8701\n')).toBe(
      'http://ingress.example.com/skypilot/haru-p-a/8701',
    );
  });

  it('refuses output that is not an endpoint', () => {
    for (const text of ['', '-\n', 'No existing clusters.\n', 'just-a-host\n']) {
      expect(() => parseEndpoint(text)).toThrow(UnparseableOutputError);
    }
  });
});

describe('not-found detection for stop and down', () => {
  it('recognises the CLI not-found lines', () => {
    expect(saysNotFound(fixture('down-not-found.txt'), 'haru-prod-aws-use1')).toBe(true);
    expect(saysNotFound("Service 'haru-a-b' not found.", 'haru-a-b')).toBe(true);
    expect(saysNotFound('Cluster haru-a-b not found.', 'haru-a-b')).toBe(true);
  });

  it('does not mistake other failures that mention "not found" for a missing target', () => {
    expect(saysNotFound('botocore.exceptions.NoCredentialsError: AWS credentials not found', 'haru-a-b')).toBe(false);
    expect(saysNotFound("Cluster 'haru-a-bc' not found.", 'haru-a-b')).toBe(false);
    expect(saysNotFound(fixture('launch-resources-unavailable.stderr'), 'haru-a-b')).toBe(false);
  });
});

it('finds a table by its first column and required labels, stopping at the first blank line', () => {
  const table = readTable(fixture('serve-status-ready.txt'), 'SERVICE_NAME', ['ID']);
  expect(table?.columns).toEqual([
    'SERVICE_NAME',
    'ID',
    'VERSION',
    'ENDPOINT',
    'LAUNCHED',
    'INFRA',
    'RESOURCES',
    'STATUS',
  ]);
  expect(table?.rows).toHaveLength(2);
  expect(readTable('nothing here', 'NAME', [])).toBeNull();
});
