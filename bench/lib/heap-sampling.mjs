// Loaded into a measured process with `node --import`: V8's sampling heap profiler, counting every
// sampled allocation, also those the collectors have freed since (by default it keeps only what is
// still alive, which says nothing about garbage made per request). The first SIGUSR2 starts
// sampling, the second writes the profile to HEAP_SAMPLING_OUT, so the caller decides which stretch
// of traffic is measured.
import { renameSync, writeFileSync } from 'node:fs';
import inspector from 'node:inspector';

const session = new inspector.Session();
session.connect();
const post = (method, params = {}) => new Promise((resolve, reject) => session.post(method, params, (err, result) => (err ? reject(err) : resolve(result))));
let sampling = false;

process.on('SIGUSR2', async () => {
  if (!sampling) {
    sampling = true;
    await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    process.stderr.write('heap sampling: started\n');
    return;
  }
  const { profile } = await post('HeapProfiler.stopSampling');
  // Written aside and renamed: the caller waits for the file to exist, and must not read half of it.
  writeFileSync(`${process.env.HEAP_SAMPLING_OUT}.partial`, JSON.stringify(profile));
  renameSync(`${process.env.HEAP_SAMPLING_OUT}.partial`, process.env.HEAP_SAMPLING_OUT);
  process.stderr.write('heap sampling: written\n');
});
