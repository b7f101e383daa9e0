// A static HTTP server for the browser test, the demo and the browser bench: each mount maps a URL prefix to a
// folder or a file ({'/js/': 'path/to/js', '/table/': 'models/x', '/sentences.txt': 'file'}). Node only.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join, normalize, resolve } from 'node:path';

const TYPES = {
  '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html; charset=utf-8', '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8', '.css': 'text/css', '.png': 'image/png', '.npy': 'application/octet-stream',
};

/** Start serving on 127.0.0.1 (a free port); resolves to {url, close()}. */
export function serve(mounts) {
  const entries = Object.entries(mounts).sort((a, b) => b[0].length - a[0].length);
  const server = createServer(async (request, response) => {
    const path = decodeURIComponent(new URL(request.url, 'http://x').pathname);
    const mount = entries.find(([prefix]) => path === prefix || (prefix.endsWith('/') && path.startsWith(prefix)));
    let file = null;
    if (mount) {
      const [prefix, target] = mount;
      const rest = normalize(path.slice(prefix.length)).replace(/^(\.\.[/\\])+/, '');
      file = prefix.endsWith('/') ? join(resolve(target), rest) : resolve(target);
      if (path.endsWith('/')) file = join(file, 'index.html');
    }
    const info = file && (await stat(file).catch(() => null));
    if (!info || !info.isFile()) {
      response.writeHead(404).end('not found');
      return;
    }
    response.writeHead(200, { 'content-type': TYPES[extname(file)] || 'application/octet-stream',
      'content-length': info.size, 'cache-control': 'no-store' });
    createReadStream(file).pipe(response);
  });
  return new Promise((done) => {
    server.listen(0, '127.0.0.1', () => {
      done({ url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() });
    });
  });
}
