import { execFile, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ConnectionOptions } from 'node:tls';
import { promisify } from 'node:util';
import { HOST, requireBinary } from './redis-topology.js';
import { tempDir } from './temp-dir.js';

/**
 * TLS for throwaway Redis topologies on loopback: a CA made for one test file, and a certificate it
 * signed for 127.0.0.1 (IP SAN) that every redis-server and sentinel of the file serves (and presents
 * as a client, to its primary or to other sentinels). The files are in a temporary directory removed
 * once the test file is done.
 */
export interface RedisTls {
  /** The CA's certificate (PEM): what REDIS_TLS_CA_FILE names to trust the servers. */
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
  /** For clients of the servers (adminCall, ioredis): trust this CA only. */
  readonly client: ConnectionOptions;
  /**
   * redis-server arguments: TLS only, on `port` (no plain port), no client certificates asked for,
   * replication over TLS (a replica connects to its primary's TLS port, and announces its own).
   */
  serverArgs(port: number): string[];
  /**
   * The same as sentinel config directives, one a line: TLS only on `port`; `tls-replication yes`
   * makes a sentinel reach the data nodes and the other sentinels over TLS, and announce its TLS port.
   */
  sentinelLines(port: number): string[];
}

const run = promisify(execFile);

/** Like requireBinary, for openssl (which has no --version). */
function requireOpenssl(): void {
  if (spawnSync('openssl', ['version'], { stdio: 'ignore' }).status !== 0) {
    throw new Error('openssl is not on PATH: the Redis TLS tests make their certificates with it (Debian: apt-get install openssl)');
  }
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A CA and a server certificate for 127.0.0.1 it signed, made with openssl (no shell) in a new temporary directory. */
export async function makeRedisTls(): Promise<RedisTls> {
  requireOpenssl();
  requireBinary('redis-server', 'redis-server');
  const dir = tempDir('agw-redis-tls-');
  const file = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => run('openssl', args, { cwd: dir });
  await openssl(
    'req', '-x509', '-new', ...EC_KEY, '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '2', '-subj', '/CN=acquirer-gateway test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
  );
  await openssl('req', '-new', ...EC_KEY, '-keyout', file('server.key'), '-out', file('server.csr'), '-subj', `/CN=${HOST}`);
  writeFileSync(
    file('server.ext'),
    ['basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature', 'extendedKeyUsage=serverAuth,clientAuth', `subjectAltName=IP:${HOST}`].join('\n') + '\n',
  );
  await openssl(
    'x509', '-req', '-in', file('server.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-set_serial', '1', '-days', '2',
    '-extfile', file('server.ext'), '-out', file('server.crt'),
  );
  const tls = { caFile: file('ca.crt'), certFile: file('server.crt'), keyFile: file('server.key') };
  const directives = (port: number): [string, string][] => [
    ['port', '0'],
    ['tls-port', String(port)],
    ['tls-cert-file', tls.certFile],
    ['tls-key-file', tls.keyFile],
    ['tls-ca-cert-file', tls.caFile],
    ['tls-auth-clients', 'no'],
    ['tls-replication', 'yes'],
  ];
  return {
    ...tls,
    client: { ca: readFileSync(tls.caFile) },
    serverArgs: (port) => directives(port).flatMap(([name, value]) => [`--${name}`, value]),
    sentinelLines: (port) => directives(port).map(([name, value]) => `${name} ${value}`),
  };
}
