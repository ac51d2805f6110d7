// Powertools for AWS Lambda (TypeScript) idempotency, measured the way go run ./infra/benchcompare
// measures twice: a trivial handler wrapped with makeIdempotent on the DynamoDB persistence layer,
// DynamoDB calls counted by an AWS SDK v3 middleware, client-side latency per request.
//
// The Go command runs it; alone:
//
//	BENCH_ENDPOINT=http://127.0.0.1:8000 BENCH_TABLE=pt BENCH_REQUESTS=500 \
//	  BENCH_CONCURRENCY=8 BENCH_HELD=50 node bench.mjs
//
// The table must exist with a string hash key "id". It prints one JSON object on stdout:
// {"implementation", "version", "phases": [{"kind", "calls": {op: n}, "errors", "latencies_ms": [...]}]}.
import { readFileSync } from 'node:fs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';

const env = (name, def) => process.env[name] ?? def;
const endpoint = env('BENCH_ENDPOINT');
const tableName = env('BENCH_TABLE');
const requests = Number(env('BENCH_REQUESTS', '500'));
const concurrency = Number(env('BENCH_CONCURRENCY', '8'));
const held = Number(env('BENCH_HELD', '50')); // 0: no in-progress phase
// BENCH_CACHE=1 turns on Powertools' in-process cache of completed records (useLocalCache).
const useLocalCache = env('BENCH_CACHE', '') === '1';
if (!endpoint || !tableName) {
  console.error('BENCH_ENDPOINT and BENCH_TABLE are required');
  process.exit(2);
}

// Count every request the SDK sends, after its retry middleware, so a retry counts as a call.
const calls = new Map();
const client = new DynamoDBClient({
  endpoint,
  region: 'us-east-1',
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
});
client.middlewareStack.add(
  (next, context) => async (args) => {
    calls.set(context.commandName, (calls.get(context.commandName) ?? 0) + 1);
    return next(args);
  },
  { step: 'finalizeRequest', priority: 'low', name: 'twiceCallCounter' },
);
const snapshot = () => {
  const out = {};
  for (const [op, n] of calls) out[op.replace(/Command$/, '')] = n;
  calls.clear();
  return out;
};

const persistenceStore = new DynamoDBPersistenceLayer({ tableName, awsSdkV3Client: client });
// Key and payload validation as twice does them: the key from the request, a hash of the body
// to refuse a reused key with a different request.
const config = new IdempotencyConfig({
  eventKeyJmesPath: 'key',
  payloadValidationJmesPath: 'body',
  expiresAfterSeconds: 7 * 24 * 3600,
  useLocalCache,
  maxLocalCacheSize: Math.max(requests, 256),
});

// Holders of an in-progress key wait on this gate inside the handler.
let gate = Promise.resolve();
let entered = 0;
const handler = makeIdempotent(
  async (event) => {
    if (event.hold) {
      entered++;
      await gate;
    }
    return { status: 201, body: responseBody(event.n) };
  },
  { persistenceStore, config },
);

// responseBody is the same payment-shaped answer the Go side stores.
const responseBody = (n) =>
  JSON.stringify({
    id: `pay_${String(n).padStart(8, '0')}`,
    status: 'succeeded',
    amount: 1000 + (n % 500),
    currency: 'usd',
    customer: 'cus_bench',
    provider_payment_id: `pi_${String(n).padStart(24, '0')}`,
    decline_code: '',
    decline_class: '',
    created_at: '2026-01-01T00:00:00Z',
  });

const event = (prefix, n, hold = false) => ({
  key: `${prefix}-${n}`,
  hold,
  n,
  body: { amount: 1000 + (n % 500), currency: 'usd', customer: 'cus_bench', payment_method: 'pm_card_visa' },
});

const lambdaContext = {
  functionName: 'bench',
  awsRequestId: 'bench',
  getRemainingTimeInMillis: () => 30_000,
};

// load runs count requests with `concurrency` in flight and returns their latencies in ms.
async function load(count, request) {
  const latencies = new Array(count);
  let next = 0;
  let errors = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= count) return;
      const start = process.hrtime.bigint();
      try {
        await request(i);
      } catch (err) {
        if (err?.name !== 'IdempotencyAlreadyInProgressError') {
          errors++;
          if (errors === 1) console.error('powertools bench:', err);
        }
      }
      latencies[i] = Number(process.hrtime.bigint() - start) / 1e6;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { latencies, errors };
}

async function main() {
  const phases = [];
  // Warm-up: connections, JIT, and the SDK's lazy loading, on keys nobody measures.
  await load(Math.min(200, requests), (i) => handler(event('warm', i), lambdaContext));
  snapshot();

  // cpu_ms: the process's user+system CPU over the phase (process.cpuUsage), for CPU per request.
  let cpu = process.cpuUsage();
  let wall = process.hrtime.bigint();
  const spent = () => {
    const d = process.cpuUsage(cpu);
    const w = Number(process.hrtime.bigint() - wall) / 1e6;
    cpu = process.cpuUsage();
    wall = process.hrtime.bigint();
    return { cpu_ms: (d.user + d.system) / 1000, wall_ms: w };
  };
  let r = await load(requests, (i) => handler(event('k', i), lambdaContext));
  phases.push({ kind: 'new', calls: snapshot(), errors: r.errors, requests, latencies_ms: r.latencies, ...spent() });

  r = await load(requests, (i) => handler(event('k', i), lambdaContext));
  phases.push({ kind: 'replay', calls: snapshot(), errors: r.errors, requests, latencies_ms: r.latencies, ...spent() });
  if (held === 0) {
    process.stdout.write(JSON.stringify({ implementation: 'powertools-typescript', version: version(), node: process.version, phases }));
    return;
  }

  // In progress: `held` handlers hold their keys; duplicates arrive while they do.
  let open;
  gate = new Promise((resolve) => (open = resolve));
  const holders = Array.from({ length: held }, (_, i) => handler(event('h', i, true), lambdaContext));
  while (entered < held) await new Promise((resolve) => setTimeout(resolve, 1));
  snapshot();
  let inProgress = 0;
  r = await load(requests, async (i) => {
    try {
      await handler(event('h', i % held), lambdaContext);
    } catch (err) {
      if (err?.name === 'IdempotencyAlreadyInProgressError') inProgress++;
      throw err;
    }
  });
  phases.push({
    kind: 'in_progress',
    calls: snapshot(),
    // Anything but "already in progress" (an error or a run of the handler) is a wrong answer.
    errors: requests - inProgress,
    requests,
    latencies_ms: r.latencies,
  });
  open();
  await Promise.all(holders);

  process.stdout.write(
    JSON.stringify({ implementation: 'powertools-typescript', version: version(), node: process.version, phases }),
  );
}

function version() {
  return JSON.parse(readFileSync(new URL('./node_modules/@aws-lambda-powertools/idempotency/package.json', import.meta.url)))
    .version;
}

await main();
