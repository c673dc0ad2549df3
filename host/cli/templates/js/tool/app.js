// {{NAME}}: a Seam tool that delegates its `prompt` argument to the provider it follows.
//
// componentize-js builds this module into a component for `wit/`: the imports below come from
// the host, and the `tool` export implements the `tool` interface. WIT names become camelCase,
// variants are `{ tag, val }`, and an `option` is a value or `undefined`. An export returns
// `err(text)` when it throws a *string* (throwing an `Error` object traps the component
// instead); an import that returns `err(e)` throws an object whose `payload` is `e`.

import { start } from 'seam:plugin/subagents@{{WIT_VERSION}}';

// The config keys this tool reads; any other key is refused, so a typo is caught at load.
const KEYS = ['toolName', 'provider'];

// What the model may send: one string, `prompt`, and nothing else.
const SCHEMA = JSON.stringify({
  type: 'object',
  properties: { prompt: { type: 'string', description: 'The task, self-contained.' } },
  required: ['prompt'],
  additionalProperties: false,
});

/** Reads the config strictly; throws a string (the `err` text) on anything unexpected. */
function binding(config) {
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
  for (const key of KEYS) {
    if (typeof fields[key] !== 'string' || fields[key] === '') {
      throw `config key \`${key}\` (a non-empty string) is required`;
    }
  }
  return { toolName: fields.toolName, provider: fields.provider };
}

/** A result the model sees as a failed call. */
function failed(message) {
  return { content: [{ tag: 'text', val: message }], isError: true };
}

/** Words for a thrown `subagent-error` (`{ tag, val }` in `payload`), or anything else thrown. */
function describeError(e) {
  const err = e?.payload;
  if (err === undefined) return String(e);
  return err.val === undefined ? err.tag : `${err.tag}: ${JSON.stringify(err.val)}`;
}

export const tool = {
  // Read once at load: the tool is mounted only while its provider is registered.
  bind(config) {
    return binding(config);
  },

  describe(config, provider) {
    const b = binding(config);
    const on = provider === undefined ? 'a subagent' : `\`${provider.name}\``;
    return {
      name: b.toolName,
      description: `Ask ${on} to do a task; only its final answer comes back.`,
      parametersSchema: SCHEMA,
    };
  },

  // `execute` has no error channel: every failure is a result with `isError: true`.
  execute(config, caller, args) {
    let provider, prompt;
    try {
      provider = binding(config).provider;
    } catch (e) {
      return failed(String(e));
    }
    try {
      prompt = JSON.parse(args)?.prompt;
    } catch (e) {
      return failed(`the arguments are not JSON: ${e.message}`);
    }
    if (typeof prompt !== 'string') return failed('missing required argument `prompt` (a string)');
    let run, result;
    try {
      run = start(provider, { prompt: [{ tag: 'text', val: prompt }], parent: caller });
      result = run.result();
    } catch (e) {
      return failed(`the run failed: ${describeError(e)}`);
    } finally {
      // Done with the run: tear it down now rather than when the call ends.
      run?.dispose();
    }
    if (result.stopReason.tag === 'completed') return { content: result.output, isError: false };
    return failed(result.diagnostic ?? `the run ended ${result.stopReason.tag}`);
  },
};
