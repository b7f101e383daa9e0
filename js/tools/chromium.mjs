// Drive headless Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe): no npm dependency.
// open(url) loads a page; evaluate(expression) awaits its value; screenshot(path) writes a PNG.
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function launch(executable = process.env.CHROMIUM || 'chromium', { width = 1100, height = 800 } = {}) {
  const profile = await mkdtemp(join(tmpdir(), 'swembed-chromium-'));
  const child = spawn(executable, [
    '--headless=new', '--remote-debugging-pipe', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
    '--no-first-run', '--no-default-browser-check', `--user-data-dir=${profile}`, `--window-size=${width},${height}`,
    'about:blank',
  ], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr = (stderr + chunk).slice(-4000); });
  const pending = new Map();
  const listeners = [];
  let nextId = 1;
  let buffer = '';
  const exited = new Promise((done) => child.on('exit', (code) => done(code)));
  exited.then((code) => {
    for (const { reject } of pending.values()) reject(new Error(`chromium exited (${code}): ${stderr}`));
  });
  child.stdio[4].on('data', (chunk) => {
    buffer += chunk.toString('utf-8');
    let end;
    while ((end = buffer.indexOf('\0')) >= 0) {
      const message = JSON.parse(buffer.slice(0, end));
      buffer = buffer.slice(end + 1);
      if (message.id && pending.has(message.id)) {
        const { resolve, reject } = pending.get(message.id);
        pending.delete(message.id);
        if (message.error) reject(new Error(`${message.error.message} ${message.error.data || ''}`));
        else resolve(message.result);
      } else for (const listener of listeners) listener(message);
    }
  });
  child.stdio[3].on('error', () => {}); // a write after exit: the pending call reports it
  const send = (method, params = {}, sessionId = undefined) => new Promise((resolve, reject) => {
    const id = nextId++;
    pending.set(id, { resolve, reject });
    child.stdio[3].write(`${JSON.stringify({ id, method, params, sessionId })}\0`);
  });
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  const consoleLines = [];
  listeners.push((m) => {
    if (m.sessionId === sessionId && m.method === 'Runtime.consoleAPICalled') {
      consoleLines.push(m.params.args.map((a) => a.value ?? a.description).join(' '));
    }
    if (m.sessionId === sessionId && m.method === 'Runtime.exceptionThrown') {
      consoleLines.push(`exception: ${m.params.exceptionDetails.exception?.description || m.params.exceptionDetails.text}`);
    }
  });
  await page('Page.enable');
  await page('Runtime.enable');
  await page('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: 1, mobile: false });
  return {
    pid: child.pid,
    console: consoleLines,
    async open(url) {
      const loaded = new Promise((done) => listeners.push((m) => {
        if (m.sessionId === sessionId && m.method === 'Page.loadEventFired') done();
      }));
      const { errorText } = await page('Page.navigate', { url });
      if (errorText) throw new Error(`${url}: ${errorText}`);
      await loaded;
    },
    /** The value of `expression` (a promise is awaited); a thrown error rejects with its text. */
    async evaluate(expression) {
      const { result, exceptionDetails } = await page('Runtime.evaluate', {
        expression, awaitPromise: true, returnByValue: true,
      });
      if (exceptionDetails) {
        throw new Error(exceptionDetails.exception?.description || exceptionDetails.text);
      }
      return result.value;
    },
    async screenshot(path) {
      const { data } = await page('Page.captureScreenshot', { format: 'png' });
      await writeFile(path, Buffer.from(data, 'base64'));
    },
    async version() {
      return (await send('Browser.getVersion')).product;
    },
    async close() {
      await send('Browser.close').catch(() => {});
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** A page's `window.swembedDone` (a promise the page sets), waited for at most `seconds`. */
export const waitForDone = (seconds) => `new Promise((resolve, reject) => {
  const deadline = Date.now() + ${seconds * 1000};
  const check = () => window.swembedDone ? resolve(window.swembedDone)
    : Date.now() > deadline ? reject(new Error('the page set no window.swembedDone')) : setTimeout(check, 50);
  check();
})`;
