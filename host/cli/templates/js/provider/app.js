// {{NAME}}: a Seam subagent provider.
//
// componentize-js builds this module into a component for `wit/`: the imports below come from
// the host, and the `provider` export implements the `provider` interface. WIT names become
// camelCase, variants are `{ tag, val }`, a `u64` is a BigInt, and an `option` is a value or
// `undefined`. An export returns `err(text)` when it throws a *string* (throwing an `Error`
// object traps the component instead).

import { ready, progress, sleep, cancelReason } from 'seam:plugin/run-context@{{WIT_VERSION}}';

// The config keys this provider reads; any other key is refused, so a typo is caught at load.
const KEYS = ['name', 'reply', 'delayMs'];

/** Reads the config strictly; throws a string (the `err` text) on anything unexpected. */
function settings(config) {
  let fields;
  try {
    fields = JSON.parse(config || '{}');
  } catch (e) {
    throw `the config is not JSON: ${e.message}`;
  }
  if (fields === null || typeof fields !== 'object' || Array.isArray(fields)) {
    throw 'the config must be a JSON object';
  }
  for (const key of Object.keys(fields)) {
    if (!KEYS.includes(key)) throw `config key \`${key}\` is unknown; known keys: ${KEYS.join(', ')}`;
  }
  for (const key of ['name', 'reply']) {
    if (key in fields && typeof fields[key] !== 'string') throw `config key \`${key}\` must be a string`;
  }
  const delayMs = fields.delayMs ?? 0;
  if (!Number.isSafeInteger(delayMs) || delayMs < 0) throw 'config key `delayMs` must be a whole number';
  return { name: fields.name ?? '{{NAME}}', reply: fields.reply ?? '{prompt}', delayMs };
}

export const provider = {
  // Called once at load; an error here refuses the plugin.
  describe(config) {
    const s = settings(config);
    return {
      name: s.name,
      capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false },
      features: { steering: false, resume: false },
      inheritsParentContext: false,
    };
  },

  // Each run gets a fresh instance, so nothing carries over between runs.
  run(config, runId, request) {
    const s = settings(config);
    // The child exists: `started` resolves and `subagent/start` is emitted.
    ready();
    progress([{ tag: 'text', val: 'working on it' }]);
    // A cancellable wait: `sleep` returns false as soon as the run is cancelled. (To wait on
    // I/O and the cancel together, poll `cancelled()` with it.)
    if (s.delayMs > 0 && !sleep(BigInt(s.delayMs))) {
      return {
        output: [],
        structured: undefined,
        stopReason: { tag: 'aborted' },
        diagnostic: cancelReason() ?? 'cancelled',
      };
    }
    const prompt = request.prompt
      .filter((block) => block.tag === 'text')
      .map((block) => block.val)
      .join('\n');
    return {
      output: [{ tag: 'text', val: s.reply.replaceAll('{prompt}', prompt) }],
      structured: undefined,
      stopReason: { tag: 'completed' },
      diagnostic: undefined,
    };
  },
};
