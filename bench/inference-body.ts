/**
 * `npm run bench:inference-body`: how long the proxy blocks the event loop reading `model` and `stream` from a
 * request body (api/proxy/inference-body.ts), for bodies from 1 KiB to 30 MiB shaped like real chat requests:
 * a long conversation of short turns, one huge text turn, one base64 image. Medians of `--rounds` reads (ms).
 */
import { parseArgs } from 'node:util';
import { readInferenceBody } from '../api/proxy/inference-body';
import { printTable, writeResult } from './support/report';
import { fmt, median } from './support/stats';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '9' } } });
const ROUNDS = Number(args.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds must be a positive integer');

const MIB = 1024 * 1024;
const turn = (i: number) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i}: ${'word '.repeat(40)}` });

/** Request bodies of about `bytes` bytes, `model` and `stream` placed after the bulk (the worst case for a scan). */
function bodies(bytes: number): [string, Buffer][] {
  const many = Array.from({ length: Math.max(1, Math.round(bytes / 230)) }, (_, i) => turn(i));
  const text = 'lorem ipsum dolor "quoted" \\ sit amet\n'.repeat(Math.round(bytes / 40));
  const image = `data:image/png;base64,${Buffer.alloc(Math.round((bytes * 3) / 4), 7).toString('base64')}`;
  const tail = { model: 'meta-llama/Llama-3.1-8B-Instruct', stream: true, max_tokens: 64 };
  return [
    ['many turns', Buffer.from(JSON.stringify({ messages: many, ...tail }))],
    ['one long text', Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: text }], ...tail }))],
    [
      'base64 image',
      Buffer.from(
        JSON.stringify({
          messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: image } }] }],
          ...tail,
        }),
      ),
    ],
  ];
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const rows: (string | number)[][] = [];
const results: { shape: string; bytes: number; medianMs: number | null; maxMs: number }[] = [];
for (const size of [1024, MIB, 8 * MIB, 30 * MIB]) {
  for (const [shape, body] of bodies(size)) {
    const times: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const t = nowMs();
      const read = readInferenceBody(body);
      times.push(nowMs() - t);
      if (!read.stream || !read.model) throw new Error('the bench body was misread');
    }
    const m = median(times);
    results.push({ shape, bytes: body.length, medianMs: m, maxMs: Math.max(...times) });
    rows.push([shape, `${(body.length / MIB).toFixed(2)} MiB`, fmt(m, 2), fmt(Math.max(...times), 2)]);
  }
}
printTable(`readInferenceBody, ${ROUNDS} rounds`, ['body', 'size', 'median ms', 'max ms'], rows);
process.stdout.write(`\n${writeResult('inference-body', { rounds: ROUNDS, results })}\n`);
