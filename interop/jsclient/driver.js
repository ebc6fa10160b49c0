'use strict';
// A steerable eureka-js-client for Muster's interop tests.
//
// The client is configured from the JSON in $DRIVER_CONFIG and started as
// an application starts it (register, heartbeats, registry fetches, deltas
// when asked). Commands arrive on stdin, one a line; every answer is one
// JSON object on stdout:
//
//   apps   {"event":"apps","apps":{APP:[{id,status,overriddenStatus,metadata,actionType}]}}
//   fetch  one registry fetch now (a delta once the client has the full registry)
//   stop   stop as an application does (cancel) and exit
//
// The client's own events (registered, heartbeat, registryUpdated,
// deregistered) and its warnings and errors are printed as they happen.
const fs = require('fs');
const readline = require('readline');
const { Eureka } = require('eureka-js-client');

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

const cfg = JSON.parse(process.env.DRIVER_CONFIG);
const say = (level) => (...args) => emit({ event: 'log', level, msg: args.map(String).join(' ').slice(0, 300) });
const logger = { debug() {}, info: say('info'), warn: say('warn'), error: say('error') };

const every = (cfg.heartbeatSecs || 1) * 1000;
const caPEM = cfg.caFile ? fs.readFileSync(cfg.caFile) : null;
const client = new Eureka({
  logger,
  cwd: __dirname,
  shouldUseDelta: !!cfg.delta,
  // A custom CA is what the client's request middleware is for.
  requestMiddleware: (opts, done) => {
    if (caPEM) opts.ca = caPEM;
    done(opts);
  },
  instance: {
    app: cfg.app,
    instanceId: cfg.instanceId,
    hostName: cfg.hostName || '127.0.0.1',
    ipAddr: '127.0.0.1',
    statusPageUrl: 'http://127.0.0.1:' + cfg.port + '/info',
    port: { '$': cfg.port, '@enabled': true },
    vipAddress: cfg.app.toLowerCase(),
    dataCenterInfo: { '@class': 'com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo', name: 'MyOwn' },
    leaseInfo: cfg.durationSecs ? { renewalIntervalInSecs: every / 1000, durationInSecs: cfg.durationSecs } : undefined,
    metadata: cfg.metadata || {},
  },
  eureka: {
    serviceUrls: { default: cfg.serviceUrls },
    heartbeatInterval: every,
    registryFetchInterval: every,
    maxRetries: cfg.maxRetries === undefined ? 3 : cfg.maxRetries,
    requestRetryDelay: 200,
    filterUpInstances: false,
    fetchRegistry: !cfg.noFetch,
  },
});

for (const ev of ['registered', 'heartbeat', 'registryUpdated', 'deregistered']) {
  client.on(ev, () => emit({ event: ev }));
}

function view() {
  const apps = {};
  for (const [name, list] of Object.entries(client.cache.app)) {
    apps[name] = list.map((i) => ({
      id: i.instanceId, status: i.status, overriddenStatus: i.overriddenStatus,
      metadata: i.metadata, actionType: i.actionType,
    }));
  }
  return apps;
}

client.start((err) => emit({ event: 'started', error: err ? String(err) : '' }));

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const cmd = line.trim();
  if (cmd === 'apps') {
    emit({ event: 'apps', apps: view() });
  } else if (cmd === 'fetch') {
    client.fetchRegistry((err) => emit({ event: 'fetched', error: err ? String(err) : '' }));
  } else if (cmd === 'stop') {
    client.stop((err) => {
      emit({ event: 'stopped', error: err ? String(err) : '' });
      process.exit(0);
    });
  } else if (cmd) {
    emit({ event: 'error', error: 'unknown command ' + cmd });
  }
});
rl.on('close', () => client.stop(() => process.exit(0)));
