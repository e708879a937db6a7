import { MemoryKeyStore } from '../../../src/keys/memory-key-store.js';
import { KeyResolver } from '../../../src/keys/key-resolver.js';
import { createPipeline } from '../../../src/app/pipeline.js';

describe('the pipeline', () => {
  it('runs the steps in the order the API defines', () => {
    const steps = createPipeline({ resolver: new KeyResolver(new MemoryKeyStore()), trustedProxies: null, proxy: () => {} });
    expect(steps.map((step) => step.name)).toEqual(['requestGuard', 'apiKeyAuth', 'ipWhitelist', 'routeMatch', 'permissions', 'requestShape', 'dispatch']);
  });
});
