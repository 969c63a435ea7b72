import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  parseEndpoint,
  parseServeStatus,
  parseStatusJson,
  parseStatusTable,
  readTable,
  saysNotFound,
  saysSkippedFailed,
  SERVICE_STATUSES,
  UnparseableOutputError,
} from './sky-output';

const fixture = (name: string) => readFileSync(path.join(__dirname, '../test/fixtures/sky', name), 'utf8');

describe('sky status (table)', () => {
  it('reads each cluster at the header offsets, keeping values that contain spaces whole', () => {
    const text = fixture('status-table.txt');
    expect(parseStatusTable(text, 'haru-prod-aws-use1')).toEqual({
      name: 'haru-prod-aws-use1',
      status: 'UP',
      statusText: 'UP',
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

  it('refuses output that is neither a table nor a not-found line', () => {
    expect(() => parseStatusTable('Traceback (most recent call last):\n  ...\n', 'x')).toThrow(UnparseableOutputError);
  });
});

// The `sky-*` fixtures are printed by SkyPilot 0.14.1's own code (test/fixtures/sky/generate.py); the line
// numbers below are of that release's sources.
describe('every status SkyPilot prints (fixtures from its own formatting code)', () => {
  it('reads every cluster status of sky/utils/status_lib.py ClusterStatus (INIT, UP, STOPPED, AUTOSTOPPING:31, PENDING:39) and the UNHEALTHY display (sky/utils/cli_utils/status_utils.py:282)', () => {
    const text = fixture('sky-status-all-statuses.txt');
    const statusOf = (name: string) => parseStatusTable(text, name)?.status;
    expect(statusOf('haru-prod-aws-use1')).toBe('UP');
    expect(statusOf('haru-prod-gcp-usc1')).toBe('INIT');
    expect(statusOf('haru-prod-broken')).toBe('UNHEALTHY');
    expect(statusOf('haru-prod-stopped')).toBe('STOPPED');
    expect(statusOf('haru-prod-pending')).toBe('PENDING');
    expect(parseStatusTable(text, 'haru-prod-autostopping')).toMatchObject({
      status: 'AUTOSTOPPING',
      statusText: 'AUTOSTOPPING',
      autostop: '10m (down)',
      launched: '2 hrs ago',
    });
  });

  it("reads `Cluster 'NAME' not found.` (status_utils.py:115) and `No existing clusters.` (:117) as no cluster", () => {
    expect(parseStatusTable(fixture('sky-status-not-found.txt'), 'haru-prod-gone')).toBeNull();
    expect(parseStatusTable(fixture('sky-status-no-clusters.txt'), 'haru-prod-gone')).toBeNull();
  });

  it('reports a status it does not know as unknown, with the printed text, instead of failing to read', () => {
    const odd = fixture('sky-status-all-statuses.txt').replace('PENDING  ', 'BOOTING  ');
    expect(parseStatusTable(odd, 'haru-prod-pending')).toMatchObject({ status: 'unknown', statusText: 'BOOTING' });
  });

  it('reads every service status of sky/serve/serve_state.py ServiceStatus, NO_REPLICA (:256) included', () => {
    const text = fixture('sky-serve-status-all-statuses.txt');
    for (const status of SERVICE_STATUSES) {
      const name = `haru-prod-${status.toLowerCase().replace(/_/g, '-')}`;
      expect(parseServeStatus(text, name)).toMatchObject({ status, statusText: status });
    }
    expect(parseServeStatus(text, 'haru-prod-no-replica-0')).toMatchObject({
      status: 'NO_REPLICA',
      replicas: { ready: 0, total: 0 },
      endpoint: null,
      replicaList: [],
    });
    const odd = text.replace('REPLICA_INIT   ', 'WARMING_UP     ');
    expect(parseServeStatus(odd, 'haru-prod-replica-init')).toMatchObject({
      status: 'unknown',
      statusText: 'WARMING_UP',
    });
  });

  it('reads every replica status of sky/serve/serve_state.py ReplicaStatus as printed', () => {
    const replicas = ['a', 'b'].flatMap(
      (part) => parseServeStatus(fixture(`sky-serve-status-replicas-${part}.txt`), 'haru-prod-replicas')!.replicaList,
    );
    expect(replicas.map((r) => r.status)).toEqual([
      'PENDING',
      'PROVISIONING',
      'STARTING',
      'READY',
      'NOT_READY',
      'SHUTTING_DOWN',
      'FAILED',
      'FAILED_INITIAL_DELAY',
      'FAILED_PROBING',
      'FAILED_PROVISION',
      'FAILED_CLEANUP',
      'PREEMPTED',
      'UNKNOWN',
    ]);
    expect(replicas[0]).toEqual({
      id: 1,
      status: 'PENDING',
      endpoint: 'http://3.85.12.1:8701',
      infra: 'AWS (us-east-1)',
    });
  });

  it("reads `Service 'NAME' not found.` (sky/client/cli/command.py:1939) and `No live services.` (sky/utils/controller_utils.py:190) as no service", () => {
    expect(parseServeStatus(fixture('sky-serve-status-not-found.txt'), 'haru-prod-gone')).toBeNull();
    expect(parseServeStatus(fixture('sky-serve-status-no-live-services.txt'), 'haru-prod-gone')).toBeNull();
  });
});

describe('sky status -o json (sky/client/cli/command.py:2319: a JSON array of StatusResponse records)', () => {
  it('reads a record, with UNHEALTHY for an INIT record whose init_kind is unhealthy and the AUTOSTOP text', () => {
    const text = fixture('sky-status.json');
    expect(parseStatusJson(text, 'haru-prod-aws-use1')).toEqual({
      name: 'haru-prod-aws-use1',
      status: 'UP',
      statusText: 'UP',
      infra: 'AWS/us-east-1',
      resources: '1x p5.4xlarge',
      autostop: '1h (down)',
      launched: '2026-02-04T10:00:00.000Z',
    });
    expect(parseStatusJson(text, 'haru-prod-broken')).toMatchObject({ status: 'UNHEALTHY', autostop: null });
    expect(parseStatusJson(text, 'haru-prod-autostopping')).toMatchObject({ status: 'AUTOSTOPPING', autostop: '10m' });
  });

  it('answers null for an unknown cluster and refuses what is not that JSON', () => {
    expect(parseStatusJson(fixture('sky-status.json'), 'other')).toBeNull();
    expect(parseStatusJson('[]', 'other')).toBeNull();
    expect(() => parseStatusJson('Clusters\nNAME  STATUS\n', 'x')).toThrow(UnparseableOutputError);
    expect(() => parseStatusJson('{"clusters": []}', 'x')).toThrow(/array/);
  });
});

describe('sky serve status', () => {
  it('reads the service row and its replicas', () => {
    expect(parseServeStatus(fixture('serve-status-ready.txt'), 'haru-prod-serve-east')).toEqual({
      name: 'haru-prod-serve-east',
      status: 'READY',
      statusText: 'READY',
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

  it('reads host:port with the scheme the caller says the process behind the port speaks', () => {
    expect(parseEndpoint('35.223.97.21:8701\n', 'https')).toBe('https://35.223.97.21:8701');
    expect(parseEndpoint('http://44.201.118.77:30001\n', 'https')).toBe('http://44.201.118.77:30001');
  });

  it('refuses output that is not an endpoint', () => {
    for (const text of ['', '-\n', 'No existing clusters.\n', 'just-a-host\n']) {
      expect(() => parseEndpoint(text)).toThrow(UnparseableOutputError);
    }
  });
});

describe('not-found detection for status, endpoint, stop and down', () => {
  it('recognises the not-found lines of SkyPilot 0.14.1', () => {
    // sky/client/cli/command.py:148 (_STATUS_PROPERTY_CLUSTER_NUM_ERROR_MESSAGE, from _show_endpoint).
    expect(saysNotFound(fixture('sky-status-endpoint-not-found.txt'), 'haru-prod-gone')).toBe(true);
    expect(saysNotFound(fixture('sky-status-endpoint-not-found.txt'), 'haru-prod-gon')).toBe(false);
    // sky/client/cli/command.py:1925 (_handle_services_request with --endpoint).
    expect(saysNotFound(fixture('sky-serve-status-endpoint-not-found.txt'), 'haru-prod-gone')).toBe(true);
    // sky/serve/serve_utils.py:1472 (terminate_services, nothing to terminate).
    expect(saysNotFound(fixture('sky-serve-down-not-found.txt'), 'haru-prod-gone')).toBe(true);
    // sky/client/cli/command.py:3853 (`sky down` of no cluster).
    expect(saysNotFound('Cluster(s) not found (tip: see `sky status`).\n', 'haru-prod-gone')).toBe(true);
    expect(saysNotFound('sky.exceptions.ClusterNotUpError: All services should have terminated.\n', 'x')).toBe(true);
  });

  it('never reads a failed service that `sky serve down` skipped as gone (serve_utils.py terminate_services)', () => {
    const skipped = fixture('sky-serve-down-failed-skipped.txt');
    // The skip message is followed by `No service to terminate.`: the service is still up.
    expect(skipped).toMatch(/No service to terminate\./);
    expect(saysSkippedFailed(skipped, 'haru-prod-failed')).toBe(true);
    expect(saysNotFound(skipped, 'haru-prod-failed')).toBe(false);
    expect(saysSkippedFailed(fixture('sky-serve-down-failed-purged.txt'), 'haru-prod-failed')).toBe(false);
    expect(saysNotFound(fixture('sky-serve-down-ready.txt'), 'haru-prod-ready')).toBe(false);
  });

  it('recognises the older not-found lines', () => {
    expect(saysNotFound(fixture('down-not-found.txt'), 'haru-prod-aws-use1')).toBe(true);
    expect(saysNotFound("Service 'haru-a-b' not found.", 'haru-a-b')).toBe(true);
    expect(saysNotFound('Cluster haru-a-b not found.', 'haru-a-b')).toBe(true);
  });

  it('does not mistake other failures that mention "not found" for a missing target', () => {
    expect(saysNotFound('botocore.exceptions.NoCredentialsError: AWS credentials not found', 'haru-a-b')).toBe(false);
    expect(saysNotFound("Cluster 'haru-a-bc' not found.", 'haru-a-b')).toBe(false);
    expect(saysNotFound(fixture('launch-resources-unavailable.stderr'), 'haru-a-b')).toBe(false);
    // sky/client/cli/command.py _show_endpoint: a port the cluster does not expose, and a cluster not UP.
    expect(saysNotFound("Endpoint 8701 not found for cluster 'haru-a-b'.", 'haru-a-b')).toBe(false);
    expect(saysNotFound("RuntimeError: Cluster 'haru-a-b' is not in UP status.", 'haru-a-b')).toBe(false);
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
