// tcp suite, competitor node: the net module on Node's single libuv event loop.
//
//   bind            net.createServer().listen(0, '127.0.0.1', cb) then server.close(cb)
//   bind_concurrent the same from 100 concurrent async loops, each doing 1/100 of the ops
//   accept_connect  one server whose 'connection' handler destroys the socket; per op the
//                   client connects, sees EOF, and waits for 'close'
//   pingpong        one connection (setNoDelay), 'data' handler echoes, 64-byte round trips
//   idle_conns      N connections, each server socket held open with a 'data' listener
//
// Usage: node tcp.js [--quick] [--case NAME]
'use strict';

const net = require('net');
const fs = require('fs');

const MSG = 64;
const CONC_UNITS = 100;
const FD_RESERVE = 100;
const HOST = '127.0.0.1';

function emit(kase, metric, value, unit) {
  process.stdout.write(JSON.stringify({
    suite: 'tcp', case: kase, competitor: 'node', metric, value, unit,
  }) + '\n');
}

const now = () => process.hrtime.bigint();
const nsPerOp = (t0, n) => Number(now() - t0) / n;

function listenOnce() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, HOST, () => srv.close(resolve));
  });
}

async function bindLoop(n) {
  for (let i = 0; i < n; i++) await listenOnce();
}

async function caseBind(warm, n) {
  await bindLoop(warm);
  const t0 = now();
  await bindLoop(n);
  emit('bind', 'ns_per_op', nsPerOp(t0, n), 'ns');
}

async function bindConcurrent(total) {
  const units = [];
  for (let u = 0; u < CONC_UNITS; u++) units.push(bindLoop(Math.floor(total / CONC_UNITS)));
  await Promise.all(units);
}

async function caseBindConcurrent(warm, n) {
  n = Math.floor(n / CONC_UNITS) * CONC_UNITS;
  await bindConcurrent(warm);
  const t0 = now();
  await bindConcurrent(n);
  emit('bind_concurrent', 'ns_per_op', nsPerOp(t0, n), 'ns');
}

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, HOST, () => resolve(server.address().port));
  });
}

function connectUntilEof(port) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, HOST);
    let got = 0;
    sock.on('data', (d) => { got += d.length; });
    sock.once('error', reject);
    sock.once('close', () => (got === 0 ? resolve() : reject(new Error('expected EOF'))));
  });
}

async function caseAcceptConnect(warm, n) {
  const server = net.createServer((sock) => sock.destroy());
  const port = await listen(server);
  const loop = async (k) => {
    for (let i = 0; i < k; i++) await connectUntilEof(port);
  };
  await loop(warm);
  const t0 = now();
  await loop(n);
  emit('accept_connect', 'ns_per_op', nsPerOp(t0, n), 'ns');
  await new Promise((r) => server.close(r));
}

async function casePingpong(warm, n) {
  const server = net.createServer((sock) => {
    sock.setNoDelay(true);
    sock.on('data', (d) => sock.write(d));
    sock.on('error', () => {});
  });
  const port = await listen(server);
  const client = net.connect(port, HOST);
  await new Promise((r) => client.once('connect', r));
  client.setNoDelay(true);
  const msg = Buffer.from('0123456789abcdef'.repeat(MSG / 16));
  let onData = null;
  client.on('data', (d) => onData(d.length));
  const run = (k) => new Promise((resolve) => {
    let done = 0;
    let have = 0;
    onData = (len) => {
      have += len;
      while (have >= MSG) {
        have -= MSG;
        done++;
        if (done === k) { resolve(); return; }
        client.write(msg);
      }
    };
    client.write(msg);
  });
  await run(warm);
  const t0 = now();
  await run(n);
  emit('pingpong', 'ns_per_op', nsPerOp(t0, n), 'ns');
  client.destroy();
  await new Promise((r) => server.close(r));
}

function rss() {
  const statm = fs.readFileSync('/proc/self/statm', 'utf8').split(' ');
  return Number(statm[1]) * 4096;
}

function fdLimit() {
  // Node raises the soft limit to the hard limit at startup; read what is in force.
  const line = fs.readFileSync('/proc/self/limits', 'utf8')
    .split('\n').find((l) => l.startsWith('Max open files'));
  return Number(line.split(/\s+/)[3]);
}

async function caseIdleConns(want) {
  const limit = fdLimit();
  let n = want;
  if (2 * n + FD_RESERVE > limit) {
    n = Math.floor((limit - FD_RESERVE) / 2);
    process.stderr.write(`idle_conns: RLIMIT_NOFILE is ${limit}, using ${n} connections instead of ${want}\n`);
  }
  let accepted = 0;
  let closed = 0;
  let waiter = null;
  const poke = () => { if (waiter) waiter(); };
  const server = net.createServer((sock) => {
    accepted++;
    sock.on('data', () => {});
    sock.on('error', () => {});
    sock.on('close', () => { closed++; poke(); });
    poke();
  });
  const port = await listen(server);
  const until = (pred) => new Promise((resolve) => {
    if (pred()) { resolve(); return; }
    waiter = () => { if (pred()) { waiter = null; resolve(); } };
  });
  await new Promise((r) => setTimeout(r, 10));
  const before = rss();
  const clients = [];
  let connected = 0;
  while (clients.length < n) {
    const k = Math.min(100, n - clients.length);
    for (let i = 0; i < k; i++) {
      const c = net.connect(port, HOST, () => { connected++; poke(); });
      c.on('error', (e) => { throw e; });
      clients.push(c);
    }
    await until(() => accepted >= clients.length && connected >= clients.length);
  }
  await new Promise((r) => setTimeout(r, 100));
  const after = rss();
  emit('idle_conns', 'bytes_per_conn', (after - before) / n, 'bytes');
  for (const c of clients) c.destroy();
  await until(() => closed >= n);
  await new Promise((r) => server.close(r));
}

async function main() {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const ci = args.indexOf('--case');
  const only = ci >= 0 ? args[ci + 1] : null;
  const q = (small, full) => (quick ? small : full);
  const want = (name) => only === null || only === name;
  // idle_conns first, so that its resident-set baseline is the fresh process.
  if (want('idle_conns')) await caseIdleConns(q(1000, 10000));
  if (want('bind')) await caseBind(q(100, 1000), q(2000, 20000));
  if (want('bind_concurrent')) await caseBindConcurrent(q(1000, 2000), q(2000, 20000));
  if (want('accept_connect')) await caseAcceptConnect(q(50, 500), q(500, 5000));
  if (want('pingpong')) await casePingpong(q(100, 1000), q(2000, 20000));
}

main().catch((e) => { console.error(e); process.exit(1); });
