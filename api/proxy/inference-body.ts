import { HaruError } from '../../schemas/errors';

/** What the proxy reads from a request body; the body itself is forwarded untouched. */
export interface InferenceBody {
  model: string;
  /** `stream: true` in the body: the answer is SSE, so a held request gets comment pings. */
  stream: boolean;
}

/**
 * Reads `model` (matched exactly, never rewritten) and `stream` from the raw body. Throws 400
 * `invalid_request` for an empty body, bad JSON, a non-object, or a missing/non-string model.
 */
export function readInferenceBody(raw: unknown): InferenceBody {
  if (!Buffer.isBuffer(raw) || raw.length === 0) {
    throw new HaruError('invalid_request', 'request body must be a JSON object with a "model"');
  }
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new HaruError('invalid_request', 'request body is not valid JSON');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new HaruError('invalid_request', 'request body must be a JSON object');
  }
  const { model, stream } = json as { model?: unknown; stream?: unknown };
  if (typeof model !== 'string' || model.length === 0) {
    throw new HaruError('invalid_request', 'request body needs a "model" string');
  }
  return { model, stream: stream === true };
}
