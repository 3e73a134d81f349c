import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import ts from 'typescript';

const kind = process.env.JOBS_TEST_MONGO_KIND;

/**
 * What a user sees when no MongoDB binary can be downloaded: the server picker (shared by the test harness
 * and `npm run sample`) runs in a child process with mongodb-memory-server pointed at a refusing host.
 */
describe('MongoDB server picker output', () => {
  // Under .cache/ so the transpiled picker resolves mongodb-memory-server from the repo's node_modules.
  const dir = resolve('.cache', 'server-picker');
  let work: string;

  beforeAll(() => {
    mkdirSync(dir, { recursive: true });
    work = mkdtempSync(join(dir, 'run-'));
    writeFileSync(join(work, 'package.json'), '{"type":"commonjs"}');
    for (const file of ['mongo-server', 'java-server']) {
      const source = readFileSync(resolve('test/support', `${file}.ts`), 'utf8');
      const { outputText } = ts.transpileModule(source, {
        compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
      });
      writeFileSync(join(work, `${file}.js`), outputText);
    }
    mkdirSync(join(work, 'binaries'));
    // The child runs in `work`: the Java server's jars are fetched afresh, as on a fresh clone.
    cpSync(resolve('test/support/java-server'), join(work, 'test/support/java-server'), { recursive: true });
  });

  afterAll(() => rmSync(work, { recursive: true, force: true }));

  /** Runs the picker with downloads failing; returns stdout and stderr lines (stderr prefixed). */
  function pickWithoutDownloads(script: string): string[] {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      MONGOMS_DOWNLOAD_URL: 'https://127.0.0.1:9/mongodb-linux-x86_64-debian12-8.2.6.tgz', // discard port: refused at once
      MONGOMS_DOWNLOAD_DIR: join(work, 'binaries'), // empty: no binary cached from an earlier download
      MONGOMS_MAX_RETRIES: '1', // no backoff between refused attempts
    };
    delete env.MONGODB_URI;
    delete env.MONGOMS_SYSTEM_BINARY;
    const { stdout, stderr } = spawnSync(process.execPath, ['-e', script], {
      cwd: work,
      env,
      encoding: 'utf8',
      timeout: 90_000,
    });
    const lines = (text: string) => text.split('\n').filter((line) => line.trim() !== '');
    return [...lines(stdout), ...lines(stderr).map((line) => `stderr: ${line}`)];
  }

  if (kind === 'mongo-java-server') {
    it('says in one line that mongodb-memory-server has no binary, then fetches and uses the Java test server', () => {
      const lines = pickWithoutDownloads(`
        const { startTestMongoServer } = require(${JSON.stringify(join(work, 'mongo-server.js'))});
        startTestMongoServer((line) => console.log('[mongo] ' + line))
          .then(async (server) => { console.log('[mongo] using ' + server.kind); await server.stop(); });
      `);
      expect(lines).toEqual([
        expect.stringMatching(/^\[mongo\] mongodb-memory-server: no MongoDB binary \(.*ECONNREFUSED.*\); trying /),
        '[mongo] using mongo-java-server',
      ]);
    }, 120_000);
  } else {
    it('says in one line that mongodb-memory-server has no binary', () => {
      const lines = pickWithoutDownloads(`
        const { startMemoryServer } = require(${JSON.stringify(join(work, 'mongo-server.js'))});
        startMemoryServer((line) => console.log('[mongo] ' + line)).then((server) => console.log('[mongo] got ' + server));
      `);
      expect(lines).toEqual([
        expect.stringMatching(/^\[mongo\] mongodb-memory-server: no MongoDB binary \(.*ECONNREFUSED.*\); trying /),
        '[mongo] got undefined',
      ]);
    }, 120_000);
  }
});
