import { temporalWorkflowUrl } from './temporal-link';

describe('temporalWorkflowUrl', () => {
  it("is the workflow's page under its namespace, its id one encoded segment", () => {
    expect(temporalWorkflowUrl({ url: 'http://127.0.0.1:8233', namespace: 'default' }, 'haru/prod/op/0f1e')).toBe(
      'http://127.0.0.1:8233/namespaces/default/workflows/haru%2Fprod%2Fop%2F0f1e',
    );
  });

  it('takes a base with a path or a trailing slash, and encodes a namespace with odd characters', () => {
    expect(temporalWorkflowUrl({ url: 'https://ops.example/temporal/', namespace: 'prod.a1b2c' }, 'w')).toBe(
      'https://ops.example/temporal/namespaces/prod.a1b2c/workflows/w',
    );
    expect(temporalWorkflowUrl({ url: 'https://t.example', namespace: 'a b' }, 'x?y#z')).toBe(
      'https://t.example/namespaces/a%20b/workflows/x%3Fy%23z',
    );
  });
});
