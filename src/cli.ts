#!/usr/bin/env -S node --max-semi-space-size=4 --expose-gc --heap-growing-percent=50 --no-allocation-site-pretenuring
// The node flags above are the ones the gateway is measured with; what each buys is in
// docs/performance.md. Started as `node dist/cli.js`, pass them yourself.
// First: on an older Node.js, one line saying which is needed, and exit 1. The rest is imported only
// then, since an older Node.js could fail to link it (a missing export) before any check ran.
import '../scripts/require-node.mjs';

await import('./cli/main.js');
