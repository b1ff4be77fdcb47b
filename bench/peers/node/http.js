// http suite, competitor node: the http module. WORKERS=1 is one process; WORKERS=N>1 uses
// the cluster module: the primary forks N workers that share the listening port (Node's
// default round-robin scheduling on Linux: the primary accepts and hands connections out).
//
// Environment: PORT (listens on 127.0.0.1:$PORT), WORKERS. On SIGTERM the primary stops its
// workers and exits.
'use strict';

const cluster = require('cluster');
const http = require('http');

const port = Number(process.env.PORT || 8080);
const workers = Math.max(1, Number(process.env.WORKERS || 1));
const BODY = 'Hello, World!';

function serve() {
  http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': BODY.length });
    res.end(BODY);
  }).listen(port, '127.0.0.1');
}

if (workers > 1 && cluster.isPrimary) {
  for (let i = 0; i < workers; i++) cluster.fork();
  let stopping = false;
  process.on('SIGTERM', () => {
    stopping = true;
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM');
    process.exit(0);
  });
  cluster.on('exit', (w, code, signal) => {
    if (!stopping) {
      console.error(`worker ${w.process.pid} died (${signal || code})`);
      process.exit(1);
    }
  });
} else {
  serve();
}
