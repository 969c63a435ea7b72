import { parsePrometheusText, sumSamples } from './prometheus-text';

const VLLM_METRICS = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B"} 2.0
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 0.0
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="weights_offloaded"} 1.0
vllm:cache_config_info{block_size="16",label="a \\"quoted\\" value"} 1.0
http_requests_total 1027 1395066363000
`;

describe('Prometheus text parsing', () => {
  it('sums every series of a metric and filters by labels', () => {
    const samples = parsePrometheusText(VLLM_METRICS);
    expect(sumSamples(samples, 'vllm:num_requests_running')).toBe(5);
    expect(sumSamples(samples, 'vllm:engine_sleep_state', { sleep_state: 'weights_offloaded' })).toBe(1);
    expect(sumSamples(samples, 'vllm:num_requests_waiting')).toBeNull();
    expect(sumSamples(samples, 'http_requests_total')).toBe(1027);
    expect(samples.find((s) => s.name === 'vllm:cache_config_info')?.labels.label).toBe('a "quoted" value');
  });
});
