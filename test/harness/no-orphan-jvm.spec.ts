import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from '@jest/globals';

const kind = process.env.JOBS_TEST_MONGO_KIND;

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function launcherPids(): number[] {
  try {
    return execFileSync('pgrep', ['-f', 'TestMongoServer.java'], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

describe('test harness', () => {
  if (kind === 'mongo-java-server') {
    it('the Java test server exits when its parent is SIGKILLed (no orphaned JVM)', async () => {
      const jars = resolve('.cache/java-server/lib');
      const source = resolve('test/support/java-server/TestMongoServer.java');
      // A parent that starts the launcher the way the harness does, then dies without any cleanup.
      const parentScript = `
        const { spawn } = require('node:child_process');
        const jvm = spawn('java', ['-cp', ${JSON.stringify(`${jars}/*`)}, ${JSON.stringify(source)}], { stdio: ['pipe', 'pipe', 'inherit'] });
        jvm.stdout.on('data', (d) => { if (String(d).startsWith('READY')) console.log('JVM ' + jvm.pid); });
      `;
      const parent: ChildProcess = spawn(process.execPath, ['-e', parentScript], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const jvmPid = await new Promise<number>((done, fail) => {
        parent.stdout?.on('data', (data) => {
          const match = /JVM (\d+)/.exec(String(data));
          if (match) done(Number(match[1]));
        });
        parent.once('exit', () => fail(new Error('parent exited before the JVM was ready')));
      });
      expect(isAlive(jvmPid)).toBe(true);
      parent.kill('SIGKILL');
      const deadline = Date.now() + 10_000;
      while (isAlive(jvmPid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(isAlive(jvmPid)).toBe(false);
    }, 30_000);
  } else {
    it(`starts no Java launcher when ${kind} serves the tests`, () => {
      const ours = launcherPids().filter((pid) => {
        const parent = Number(execFileSync('ps', ['-o', 'ppid=', '-p', String(pid)], { encoding: 'utf8' }).trim());
        return parent === process.ppid || parent === process.pid;
      });
      expect(ours).toEqual([]);
    });
  }
});
