// A loopback proxy that adds `Authorization: Bearer <token>` to every request and changes
// nothing else (Host, Origin and the body pass through as sent): the conformance client
// sends no token, and the bridge serves no request without one.
// usage: node bearer_proxy.mjs UPSTREAM_URL TOKEN_FILE  (prints the port it listens on)
import http from 'node:http';
import { readFileSync } from 'node:fs';

const upstream = new URL(process.argv[2]);
const token = readFileSync(process.argv[3], 'utf8').trim();

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const forward = http.request(
    { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers },
    (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    },
  );
  forward.on('error', (e) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`bearer proxy: ${e.message}`);
  });
  req.pipe(forward);
  // A client that closes its SSE stream closes the bridge's too.
  res.on('close', () => forward.destroy());
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
