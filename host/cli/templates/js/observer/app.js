// {{NAME}}: a Seam observer that logs the name of every lifecycle event.
//
// componentize-js builds this module into a component for `wit/`: the imports below come from
// the host, and the `observer` export implements the `observer` interface. WIT names become
// camelCase and an enum case is its WIT name as a string. An export returns `err(text)` when
// it throws a *string* (throwing an `Error` object traps the component instead).

import { log } from 'seam:plugin/host@{{WIT_VERSION}}';

export const observer = {
  onEvent(config, event) {
    // Throwing returns `err`: the host logs it and carries on.
    if (!['', '{}'].includes(config.trim())) throw 'this observer takes no config';
    let name;
    try {
      name = JSON.parse(event)?.event ?? '?';
    } catch (e) {
      throw `the event is not JSON: ${e.message}`;
    }
    // The host tags the line with this plugin's id (`RUST_LOG=seam_host=info` shows it).
    log('info', `{{NAME}} saw ${name}`);
  },
};
