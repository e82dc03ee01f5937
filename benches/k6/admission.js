// k6 load test for memcached-webhook: posts AdmissionReviews, the way the kube-apiserver does,
// to both webhooks at a fixed arrival rate and checks every answer. See README.md beside this file.
//
//   k6 run benches/k6/admission.js
//   k6 run -e BASE_URL=https://memcached-webhook.memcached-webhook-system.svc -e RATE=500 \
//          -e DURATION=2m benches/k6/admission.js
//
// Environment:
//   BASE_URL          webhook server, default https://127.0.0.1:9443 (the dev server)
//   RATE              requests per second, default 200
//   DURATION          how long, default 1m
//   VUS, MAX_VUS      pre-allocated and maximum virtual users, default 20 and 200
//   INSECURE          "true" skips TLS verification (else trust SSL_CERT_FILE or the system roots)
//   HOST_IP           connect to this IP for BASE_URL's host name (port-forward with a real name)
//   P99_MS            threshold on http_req_duration p(99) in ms, default 25
//   SCENARIOS         comma-separated scenario names to run (default: all)

import http from 'k6/http';
import { check, fail } from 'k6';
import encoding from 'k6/encoding';
import { Counter } from 'k6/metrics';

// Every AdmissionReview posted here is a test-suite fixture (tests/fixtures/), so the load test
// sends exactly what the tests check. .ci/check-deploy reads this list and fails when a file is
// missing. Each fixture's object is under .request.object.
export const FIXTURES = [
  'minimal-empty-spec.json',
  'mutate-create-kubectl-apply.json',
  'mutate-update-kubectl-apply.json',
  'validate-create-kubectl-create.json',
  'fully-specified.json',
  'autoscaling-enabled.json',
  'large-annotations.json',
  'invalid-spec.json',
];

const MUTATE = '/mutate-memcached-c5c3-io-v1beta1-memcached';
const VALIDATE = '/validate-memcached-c5c3-io-v1beta1-memcached';

// What the traffic looks like and what each answer must be. `weight` is the share of requests;
// `patch`: true = a JSON Patch must come back (and must touch every path in `paths`),
// false = no patch, undefined = either. A denial must carry `code` and field causes.
const SCENARIOS = [
  { name: 'minimal-mutate', fixture: 'minimal-empty-spec.json', path: MUTATE, weight: 10,
    expect: { allowed: true, patch: true, paths: ['/spec/replicas', '/spec/image', '/spec/memcached'] } },
  { name: 'minimal-validate', fixture: 'minimal-empty-spec.json', path: VALIDATE, weight: 10,
    expect: { allowed: true } },
  { name: 'apply-create-mutate', fixture: 'mutate-create-kubectl-apply.json', path: MUTATE, weight: 15,
    expect: { allowed: true, patch: true,
      paths: ['/spec/memcached/maxConnections', '/spec/memcached/threads', '/spec/memcached/maxItemSize'] } },
  { name: 'apply-create-validate', fixture: 'mutate-create-kubectl-apply.json', path: VALIDATE, weight: 15,
    expect: { allowed: true } },
  { name: 'apply-update-mutate', fixture: 'mutate-update-kubectl-apply.json', path: MUTATE, weight: 15,
    expect: { allowed: true, patch: true,
      paths: ['/spec/monitoring/exporterImage', '/spec/monitoring/serviceMonitor/interval',
        '/spec/monitoring/serviceMonitor/scrapeTimeout'] } },
  { name: 'create-validate', fixture: 'validate-create-kubectl-create.json', path: VALIDATE, weight: 10,
    expect: { allowed: true } },
  { name: 'full-mutate', fixture: 'fully-specified.json', path: MUTATE, weight: 5,
    expect: { allowed: true, patch: false } },
  { name: 'full-validate', fixture: 'fully-specified.json', path: VALIDATE, weight: 5,
    expect: { allowed: true } },
  { name: 'autoscaling-mutate', fixture: 'autoscaling-enabled.json', path: MUTATE, weight: 5,
    expect: { allowed: true, patch: true, paths: ['/spec/autoscaling/metrics', '/spec/autoscaling/behavior'] } },
  { name: 'large-mutate', fixture: 'large-annotations.json', path: MUTATE, weight: 2,
    expect: { allowed: true } },
  { name: 'large-validate', fixture: 'large-annotations.json', path: VALIDATE, weight: 2,
    expect: { allowed: true } },
  { name: 'invalid-validate', fixture: 'invalid-spec.json', path: VALIDATE, weight: 6,
    expect: { allowed: false, code: 422, causes: true } },
];

const BASE_URL = (__ENV.BASE_URL || 'https://127.0.0.1:9443').replace(/\/+$/, '');
const RATE = Number(__ENV.RATE || 200);
const DURATION = __ENV.DURATION || '1m';
const P99_MS = Number(__ENV.P99_MS || 25);
const ONLY = (__ENV.SCENARIOS || '').split(',').map((s) => s.trim()).filter((s) => s);

// A placeholder of the width of a UUID: each request gets a fresh uid, as from the API server,
// with one string replacement instead of re-encoding a 100 KB body.
const UID_SLOT = '00000000-0000-4000-8000-00000000uid0';

function load(name) {
  if (FIXTURES.indexOf(name) === -1) {
    throw new Error(`scenario fixture ${name} is not listed in FIXTURES`);
  }
  const review = JSON.parse(open(`../../tests/fixtures/${name}`));
  if (!review.request || !review.request.uid) {
    throw new Error(`${name}: not an AdmissionReview request`);
  }
  review.request.uid = UID_SLOT;
  return JSON.stringify(review);
}

const selected = SCENARIOS.filter((s) => ONLY.length === 0 || ONLY.indexOf(s.name) !== -1);
if (selected.length === 0) {
  throw new Error(`SCENARIOS=${__ENV.SCENARIOS} matches none of ${SCENARIOS.map((s) => s.name)}`);
}
const bodies = {};
for (const s of selected) {
  if (!(s.fixture in bodies)) bodies[s.fixture] = load(s.fixture);
}
const totalWeight = selected.reduce((sum, s) => sum + s.weight, 0);

const denied = new Counter('admission_denied');
const patched = new Counter('admission_patched');

const hosts = {};
if (__ENV.HOST_IP) {
  hosts[BASE_URL.replace(/^https?:\/\//, '').replace(/[:/].*$/, '')] = __ENV.HOST_IP;
}

export const options = {
  scenarios: {
    admission: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: Number(__ENV.VUS || 20),
      maxVUs: Number(__ENV.MAX_VUS || 200),
    },
  },
  insecureSkipTLSVerify: __ENV.INSECURE === 'true',
  hosts,
  // The API server speaks HTTP/1.1 with keep-alive to webhooks; so does k6 here.
  noConnectionReuse: false,
  thresholds: {
    http_req_duration: [`p(99)<${P99_MS}`],
    'http_req_duration{webhook:mutate}': [`p(99)<${P99_MS}`],
    'http_req_duration{webhook:validate}': [`p(99)<${P99_MS}`],
    http_req_failed: ['rate==0'],
    // Any wrong answer fails the run (and makes k6 exit non-zero): CI relies on it.
    checks: ['rate==1'],
    // An iteration is dropped when no VU is free at its start time: k6 fell behind, not the
    // server answering wrongly. A handful happen when k6 itself is briefly starved of CPU on a
    // shared machine; more than 1 in 1000 means the rate is beyond what k6 and the server can
    // do on these cores, and the latency figures stop meaning anything.
    dropped_iterations: [`rate<${RATE / 1000}`],
  },
  summaryTrendStats: ['min', 'med', 'avg', 'p(90)', 'p(95)', 'p(99)', 'p(99.9)', 'max'],
};

function pick() {
  let r = Math.random() * totalWeight;
  for (const s of selected) {
    r -= s.weight;
    if (r < 0) return s;
  }
  return selected[selected.length - 1];
}

function uuid() {
  const hex = '0123456789abcdef';
  let out = '';
  for (let i = 0; i < 36; i++) {
    if (i === 8 || i === 13 || i === 18 || i === 23) out += '-';
    else if (i === 14) out += '4';
    else out += hex[(Math.random() * 16) | 0];
  }
  return out;
}

// Decodes a base64 JSON Patch; null when it is not one.
function patchOps(b64) {
  try {
    const ops = JSON.parse(encoding.b64decode(b64, 'std', 's'));
    return Array.isArray(ops) ? ops : null;
  } catch (e) {
    return null;
  }
}

// True when an op sets `path`: directly, or by adding a parent object that contains it.
function touches(ops, path) {
  return ops.some((op) => {
    if (op.op !== 'add' && op.op !== 'replace') return false;
    if (op.path === path) return true;
    if (!path.startsWith(`${op.path}/`)) return false;
    let value = op.value;
    for (const key of path.slice(op.path.length + 1).split('/')) {
      if (value === null || typeof value !== 'object' || !(key in value)) return false;
      value = value[key];
    }
    return true;
  });
}

export default function () {
  const s = pick();
  const uid = uuid();
  const webhook = s.path === MUTATE ? 'mutate' : 'validate';
  const res = http.post(`${BASE_URL}${s.path}?timeout=3s`, bodies[s.fixture].replace(UID_SLOT, uid), {
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, */*',
      'User-Agent': 'kube-apiserver-admission',
    },
    tags: { name: s.name, webhook },
    timeout: '3s',
  });

  let review = null;
  try {
    review = res.json();
  } catch (e) {
    review = null;
  }
  const answer = review && review.response ? review.response : {};
  const e = s.expect;
  const ops = typeof answer.patch === 'string' ? patchOps(answer.patch) : null;
  const status = answer.status || {};
  const causes = status.details && Array.isArray(status.details.causes) ? status.details.causes : [];

  const checks = {
    'HTTP 200': (r) => r.status === 200,
    'an admission.k8s.io/v1 AdmissionReview': () =>
      review !== null && review.apiVersion === 'admission.k8s.io/v1' && review.kind === 'AdmissionReview',
    'uid echoed': () => answer.uid === uid,
    [`allowed is ${e.allowed}`]: () => answer.allowed === e.allowed,
  };
  if (webhook === 'validate') {
    checks['no patch from the validating webhook'] = () => answer.patch === undefined && answer.patchType === undefined;
  }
  if (e.patch === true) {
    checks['a JSON Patch'] = () => answer.patchType === 'JSONPatch' && ops !== null && ops.length > 0;
    for (const p of e.paths || []) {
      checks[`patch sets ${p}`] = () => ops !== null && touches(ops, p);
    }
  } else if (e.patch === false) {
    checks['no patch'] = () => answer.patch === undefined && answer.patchType === undefined;
  } else if (answer.patch !== undefined) {
    checks['a well-formed patch'] = () => answer.patchType === 'JSONPatch' && ops !== null;
  }
  if (e.code !== undefined) {
    checks[`status.code ${e.code}`] = () => status.code === e.code;
  }
  if (e.causes) {
    checks['causes name fields'] = () =>
      causes.length > 0 && causes.every((c) => typeof c.field === 'string' && c.field !== '' && typeof c.message === 'string');
  }
  if (!check(res, checks, { name: s.name, webhook })) {
    if (__ENV.FAIL_FAST === 'true') fail(`${s.name}: unexpected answer: ${res.status} ${res.body}`);
  }
  if (answer.allowed === false) denied.add(1, { name: s.name });
  if (ops !== null) patched.add(1, { name: s.name });
}
