// What the TypeScript SDK checks share: a bound on a promise, and the servers they start
// (a server that prints "listening on URL" on stdout), killed at the end with stopAll().
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export const withTimeout = (promise, ms, what) =>
  Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms))]);

const servers = [];

// start(WHAT, CMD, ARGS): starts CMD ARGS and resolves with the URL of its "listening on" line.
export async function start(what, command, args) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  servers.push(child);
  const lines = createInterface({ input: child.stdout });
  return withTimeout(
    new Promise((resolve, reject) => {
      lines.on('line', (line) => {
        const match = line.match(/^listening on (\S+)/);
        if (match) resolve(match[1]);
      });
      child.on('exit', (code) => reject(new Error(`${what} exited (${code})`)));
    }),
    30000,
    `${what} start`
  );
}

// Kills every server start() started.
export function stopAll() {
  for (const child of servers) child.kill();
}
