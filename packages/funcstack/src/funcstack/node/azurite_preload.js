// Loaded before Azurite (`node --require <this> azurite.js ...`, funcstack.services.start_azurite).
//
// Azurite's telemetry module (dist/src/common/Telemetry.js, azurite 3.37) requires the
// Application Insights SDK when it loads, whether telemetry is on or not: 0.85 s of the 1.4 s of
// CPU an Azurite start takes here, and funcstack starts it with --disableTelemetry, which then
// never touches the SDK. This puts a stand-in into require's cache (Node's public `require.cache`)
// under the SDK's resolved file: the same `require("applicationinsights")` gets an object that
// loads the real module at its first use and hands on every property from it. Nothing else
// changes: with telemetry on, the first `appInsights.setup(...)` loads the SDK as before.
// packages/funcstack/tests/test_azurite_preload.py holds both halves (nothing loaded until used;
// the real module once used) and names what moved if Azurite stops requiring the SDK by name.
"use strict";

const Module = require("module");
const path = require("path");

const LAZY = ["applicationinsights"];
// Resolved as Azurite's own require resolves it: from the folder of its main script.
const from = process.argv[1] ? path.dirname(process.argv[1]) : process.cwd();

for (const name of LAZY) {
  let file;
  try {
    file = require.resolve(name, { paths: [from] });
  } catch {
    continue; // not installed beside Azurite: nothing to stand in for
  }
  let real = null;
  const load = () => {
    if (real === null) {
      delete require.cache[file];
      real = require(file);
    }
    return real;
  };
  const standIn = new Module(file, module);
  standIn.filename = file;
  standIn.loaded = true;
  standIn.exports = new Proxy(
    {},
    {
      get: (_, key) => load()[key],
      has: (_, key) => key in load(),
      ownKeys: () => Reflect.ownKeys(load()),
      getOwnPropertyDescriptor: (_, key) => {
        const d = Reflect.getOwnPropertyDescriptor(load(), key);
        return d === undefined ? undefined : { ...d, configurable: true };
      },
    },
  );
  require.cache[file] = standIn;
}
