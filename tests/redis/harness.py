#!/usr/bin/env python3
"""Start real Redis servers on loopback, run a command against them, stop them.

  harness.py --mode single|cluster [--replicas N] [--auth] [--tls]
             [--module PATH [--module-nodes N]] [--engine E]
             -- COMMAND ARGS...

single: one non-cluster server, also listening on a unix socket.
cluster: 3 masters (+ N replicas each), created with `redis-cli --cluster
create` and waited for until every node reports cluster_state:ok (and
every replica is in sync).
--auth: every server wants a password (requirepass), and has an ACL user
with only the commands sluice needs.
--tls (single): the server also listens for TLS on another port, with
certificates made here with the openssl tool (a CA, a server certificate
for 127.0.0.1 and localhost, a client certificate, and an unrelated CA);
client certificates are required.
--module PATH: every server loads the sluice module (--loadmodule PATH);
with --module-nodes N only the first N servers started do (a mixed
cluster: with no replicas, N of the 3 masters).
--engine E: the stores the suites open get engine=E (auto|module|lua|script).

The command gets in its environment:
  SLUICE_REDIS_MODE          single | cluster
  SLUICE_REDIS_NODES         host:port,... (every node)
  SLUICE_REDIS_PIDS          port:pid,...
  SLUICE_REDIS_SOCKET        (single) the server's unix socket
  SLUICE_REDIS_SPARE_PORT    a free port nothing listens on (yet)
  SLUICE_REDIS_TMP           a scratch directory, removed afterwards
  SLUICE_REDIS_AUTH          (--auth) store parameters that authenticate
                             as the ACL user, e.g. "user=U;password=P"
  SLUICE_REDIS_PASSWORD      (--auth) the default user's password
  SLUICE_REDIS_TLS_PORT      (--tls) the TLS port
  SLUICE_REDIS_TLS_DIR       (--tls) ca.crt, client.crt, client.key,
                             other-ca.crt
  SLUICE_CONFORMANCE_STORE   a store string for the conformance suite
  SLUICE_REDIS_STORE_EXTRA   (--engine) "engine=E", for the suites' stores
  SLUICE_REDIS_MODULE        (--module) the module's path
  SLUICE_REDIS_MODULE_PORTS  (--module) the ports of the servers that load it

Exits 77 (meson's "skipped") with a message when redis-server is missing.
Ports are picked at random in 17000-19999 (the cluster bus uses port+10000)
and checked free; a server that fails to start is retried on other ports.
"""
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77

# --auth: the default user's password, and an ACL user allowed only what
# the store sends (docs/redis.md lists the same rules).
PASSWORD = 'sluice-default-pw'
ACL_USER = 'limiter'
ACL_PASSWORD = 'limiter-pw'
ACL_RULES = ['on', '>' + ACL_PASSWORD, '~*', 'resetchannels', '-@all',
             '+evalsha', '+script|load', '+fcall', '+function|load',
             '+function|list', '+cluster|slots', '+asking',
             '+wait', '+del', '+get', '+mget', '+set', '+time', '+ping', '+select',
             '+command|info']
# and, where the module is loaded (a rule naming an unknown command fails)
ACL_MODULE_RULES = ['+sluice.run']
AUTH = []  # redis-cli arguments, set by --auth


def log(msg):
    print('harness: ' + msg, flush=True)


def port_free(p):
    for q in (p, p + 10000):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(('127.0.0.1', q))
        except OSError:
            return False
        finally:
            s.close()
    return True


def pick_ports(n, used):
    out = []
    base = random.Random(os.getpid() ^ int(time.time() * 1000)).randrange(
        17000, 19999 - n)
    p = base
    while len(out) < n:
        if p >= 19999:
            p = 17000
        if p not in used and port_free(p):
            out.append(p)
        p += 1
    return out


def cli(port, *args, timeout=5):
    r = subprocess.run(['redis-cli', '-h', '127.0.0.1', '-p', str(port)] +
                       AUTH + list(args), capture_output=True, text=True,
                       timeout=timeout)
    return r.stdout.strip()


def make_certs(d):
    """A CA, a server and a client certificate it signs, and another CA."""
    def ossl(*a):
        subprocess.run(['openssl'] + list(a), check=True,
                       capture_output=True, timeout=60)
    key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
           '-nodes']
    os.makedirs(d, exist_ok=True)
    for ca in ('ca', 'other-ca'):
        ossl('req', '-x509', '-new', *key, '-keyout', os.path.join(d, ca +
             '.key'), '-out', os.path.join(d, ca + '.crt'), '-days', '2',
             '-subj', '/CN=sluice test ' + ca)
    for who, ext in (('server', 'subjectAltName=DNS:localhost,IP:127.0.0.1\n'
                      'extendedKeyUsage=serverAuth\n'),
                     ('client', 'extendedKeyUsage=clientAuth\n')):
        extf = os.path.join(d, who + '.ext')
        with open(extf, 'w') as f:
            f.write(ext)
        ossl('req', '-new', *key, '-keyout', os.path.join(d, who + '.key'),
             '-out', os.path.join(d, who + '.csr'), '-subj',
             '/CN=sluice test ' + who)
        ossl('x509', '-req', '-in', os.path.join(d, who + '.csr'), '-CA',
             os.path.join(d, 'ca.crt'), '-CAkey', os.path.join(d, 'ca.key'),
             '-CAcreateserial', '-out', os.path.join(d, who + '.crt'),
             '-days', '2', '-extfile', extf)


# --module: the module's path and how many more servers may load it (None:
# all), and the ports of those that did.
MODULE = {'path': None, 'left': None, 'ports': []}


def start_server(tmp, port, cluster, extra=()):
    d = os.path.join(tmp, str(port))
    os.makedirs(d, exist_ok=True)
    args = ['redis-server', '--port', str(port), '--bind', '127.0.0.1',
            '--save', '', '--appendonly', 'no', '--dir', d,
            '--logfile', os.path.join(d, 'log'), '--daemonize', 'no',
            '--enable-debug-command', 'yes', '--protected-mode', 'no']
    args += list(extra)
    if MODULE['path'] and MODULE['left'] != 0:
        args += ['--loadmodule', MODULE['path']]
        MODULE['ports'].append(port)
        if MODULE['left'] is not None:
            MODULE['left'] -= 1
    if AUTH:
        args += ['--requirepass', PASSWORD, '--masterauth', PASSWORD]
    if cluster:
        args += ['--cluster-enabled', 'yes', '--cluster-config-file',
                 'nodes.conf', '--cluster-node-timeout', '1000',
                 '--cluster-replica-validity-factor', '0',
                 # Replicas stay with the master they were given: a replica
                 # migrating to a master that looked orphaned while the
                 # cluster formed full-syncs from it and drops what it
                 # held (a replica test once read 0 bytes that way).
                 '--cluster-allow-replica-migration', 'no']
    return subprocess.Popen(args, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def wait_ping(port, proc, secs=5):
    """True once the server answering on port is proc itself.  Another
    harness running at the same time may have found the same port free and
    bound it first: its server answers PING as well, while proc is still
    failing to bind, so the answer must name proc's pid."""
    mine = 'process_id:%d' % proc.pid
    end = time.time() + secs
    while time.time() < end:
        if proc.poll() is not None:
            return False
        try:
            if mine in cli(port, 'INFO', 'server', timeout=1).split():
                return True
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.05)
    return False


def start_all(tmp, n, cluster, extra=lambda p: (), avoid=()):
    procs, ports, used = {}, [], set(avoid)
    for attempt in range(5):
        want = n - len(ports)
        if want == 0:
            break
        for p in pick_ports(want, used):
            used.add(p)
            pr = start_server(tmp, p, cluster, extra(p))
            if wait_ping(p, pr):
                procs[p] = pr
                ports.append(p)
            else:
                pr.kill()
                pr.wait()
                if p in MODULE['ports']:  # its turn goes to the next one
                    MODULE['ports'].remove(p)
                    if MODULE['left'] is not None:
                        MODULE['left'] += 1
    if len(ports) < n:
        raise RuntimeError('could not start %d redis servers' % n)
    return procs, ports


def cluster_ok(ports, replicas):
    for p in ports:
        info = cli(p, 'CLUSTER', 'INFO')
        if 'cluster_state:ok' not in info:
            return False
        if 'cluster_slots_assigned:16384' not in info:
            return False
        if 'cluster_known_nodes:%d' % len(ports) not in info:
            return False
    if replicas:
        for p in ports:
            rep = cli(p, 'INFO', 'replication')
            if 'role:slave' in rep and 'master_link_status:up' not in rep:
                return False
            if 'role:slave' in rep and 'master_sync_in_progress:1' in rep:
                return False
            # A master counts only with all its replicas attached and
            # streaming (state=online, not in a full sync).
            if 'role:master' in rep:
                if 'connected_slaves:%d' % replicas not in rep:
                    return False
                if rep.count('state=online') != replicas:
                    return False
    return True


def main():
    argv = sys.argv[1:]
    if '--' not in argv:
        print(__doc__)
        return 2
    sep = argv.index('--')
    opts, cmd = argv[:sep], argv[sep + 1:]
    mode, replicas, auth, tls = 'single', 0, False, False
    module, module_nodes, engine = None, None, None
    i = 0
    while i < len(opts):
        if opts[i] == '--mode':
            mode = opts[i + 1]
            i += 2
        elif opts[i] == '--replicas':
            replicas = int(opts[i + 1])
            i += 2
        elif opts[i] == '--module':
            module = os.path.abspath(opts[i + 1])
            i += 2
        elif opts[i] == '--module-nodes':
            module_nodes = int(opts[i + 1])
            i += 2
        elif opts[i] == '--engine':
            engine = opts[i + 1]
            i += 2
        elif opts[i] == '--auth':
            auth = True
            i += 1
        elif opts[i] == '--tls':
            tls = True
            i += 1
        elif opts[i] == '--skip':
            print('SKIP: ' + opts[i + 1], flush=True)
            return SKIP
        else:
            print('unknown option ' + opts[i])
            return 2
    if not shutil.which('redis-server') or not shutil.which('redis-cli'):
        print('SKIP: redis-server is not installed; the Redis tests are '
              'skipped (apt-get install redis-server to run them)', flush=True)
        return SKIP
    if tls and not shutil.which('openssl'):
        print('SKIP: the openssl tool is not installed; the Redis TLS tests '
              'are skipped (apt-get install openssl to run them)', flush=True)
        return SKIP
    if module and not os.path.exists(module):
        print('module %s not found' % module)
        return 2
    tmp = tempfile.mkdtemp(prefix='sluice-redis-')
    procs = {}
    rc = 1
    t0 = time.time()
    env = dict(os.environ)
    if auth:
        AUTH.extend(['-a', PASSWORD, '--no-auth-warning'])
    MODULE['path'], MODULE['left'] = module, module_nodes
    try:
        if mode == 'single':
            sock = os.path.join(tmp, 'redis.sock')
            extra = ['--unixsocket', sock, '--unixsocketperm', '700']
            tls_port = None
            if tls:
                tdir = os.path.join(tmp, 'tls')
                make_certs(tdir)
                tls_port = pick_ports(1, set())[0]
                extra += ['--tls-port', str(tls_port),
                          '--tls-cert-file', os.path.join(tdir, 'server.crt'),
                          '--tls-key-file', os.path.join(tdir, 'server.key'),
                          '--tls-ca-cert-file', os.path.join(tdir, 'ca.crt'),
                          '--tls-auth-clients', 'yes']
                env['SLUICE_REDIS_TLS_PORT'] = str(tls_port)
                env['SLUICE_REDIS_TLS_DIR'] = tdir
            procs, ports = start_all(tmp, 1, False, lambda p: extra,
                                     avoid=[tls_port] if tls else [])
            env['SLUICE_REDIS_SOCKET'] = sock
        else:
            n = 3 * (1 + replicas)
            procs, ports = start_all(tmp, n, True)
            nodes = ['127.0.0.1:%d' % p for p in ports]
            r = subprocess.run(['redis-cli'] + AUTH + ['--cluster', 'create'] +
                               nodes +
                               ['--cluster-replicas', str(replicas),
                                '--cluster-yes'],
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                log('cluster create failed:\n' + r.stdout + r.stderr)
                return 1
            end = time.time() + 60
            # Ok three checks in a row: a topology still settling (a
            # replica re-attaching) can pass one check between changes.
            steady = 0
            while steady < 3:
                if time.time() > end:
                    log('cluster did not become ok in 60 s')
                    return 1
                steady = steady + 1 if cluster_ok(ports, replicas) else 0
                time.sleep(0.1)
            # Masters first: tests pick seeds and victims from this order.
            masters = [p for p in ports
                       if 'role:master' in cli(p, 'INFO', 'replication')]
            ports = masters + [p for p in ports if p not in masters]
        auth_params = ''
        if auth:
            for p in ports:
                rules = ACL_RULES + (ACL_MODULE_RULES
                                     if p in MODULE['ports'] else [])
                if cli(p, 'ACL', 'SETUSER', ACL_USER, *rules) != 'OK':
                    log('ACL SETUSER failed on %d' % p)
                    return 1
            auth_params = 'user=%s;password=%s' % (ACL_USER, ACL_PASSWORD)
            env['SLUICE_REDIS_AUTH'] = auth_params
            env['SLUICE_REDIS_PASSWORD'] = PASSWORD
        log('%s with %d node(s) up in %.1f s: %s%s%s' %
            (mode, len(ports), time.time() - t0,
             ','.join(str(p) for p in ports), ' auth' if auth else '',
             ' tls' if tls else '') +
            (' module on %s' % ','.join(str(p) for p in MODULE['ports'])
             if module else '') + (' engine=' + engine if engine else ''))
        env['SLUICE_REDIS_SPARE_PORT'] = str(pick_ports(1, set(ports))[0])
        env['SLUICE_REDIS_TMP'] = tmp
        env['SLUICE_REDIS_MODE'] = mode
        env['SLUICE_REDIS_NODES'] = ','.join('127.0.0.1:%d' % p for p in ports)
        env['SLUICE_REDIS_PIDS'] = ','.join('%d:%d' % (p, procs[p].pid)
                                            for p in ports)
        seeds = ','.join('127.0.0.1:%d' % p for p in ports[:2])
        # Generous timeouts: CI machines are small and sanitizers slow.
        env['SLUICE_CONFORMANCE_STORE'] = (
            'redis:nodes=%s;timeout_ms=2000;connect_timeout_ms=2000%s' %
            (seeds, ';' + auth_params if auth_params else ''))
        if engine:
            env['SLUICE_REDIS_STORE_EXTRA'] = 'engine=' + engine
            env['SLUICE_CONFORMANCE_STORE'] += ';engine=' + engine
        if module:
            env['SLUICE_REDIS_MODULE'] = module
            env['SLUICE_REDIS_MODULE_PORTS'] = ','.join(
                str(p) for p in MODULE['ports'])
        rc = subprocess.run(cmd, env=env).returncode
        if rc != 0 and rc != SKIP:
            for p in ports:
                lf = os.path.join(tmp, str(p), 'log')
                if os.path.exists(lf):
                    tail = open(lf, errors='replace').read().splitlines()[-8:]
                    log('server %d log tail:\n  ' % p + '\n  '.join(tail))
        return rc
    finally:
        for pr in procs.values():
            if pr.poll() is None:
                try:
                    pr.send_signal(signal.SIGCONT)
                except OSError:
                    pass
                pr.kill()
        for pr in procs.values():
            try:
                pr.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
