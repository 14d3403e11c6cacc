// Loaded before Azurite (`node --require <this> azurite.js ...`, funcstack.services.start_azurite).
//
// Azurite (3.37) requires, when it loads, modules that a start as funcstack makes it never uses,
// or uses only for a request of a kind (LAZY below, with where each is required):
//   - the Application Insights SDK: its telemetry module (dist/src/common/Telemetry.js) requires
//     it, telemetry on or off, and funcstack starts Azurite with --disableTelemetry (0.85 s of
//     the 1.4 s of CPU a start took here);
//   - its blob server on a SQL database (dist/src/blob/SqlBlobServer.js, which loads Sequelize):
//     its blob service factory (dist/src/blob/BlobServerFactory.js) requires it whatever the
//     metadata is kept in, and builds it only when AZURITE_DB names a database (funcstack never
//     sets it);
//   - axios, which its blob handlers (dist/src/blob/handlers/BlobHandler.js, BlockBlobHandler.js)
//     use only to copy a blob from a URL;
//   - jsonwebtoken, which its OAuth authenticators (dist/src/*/authentication/*TokenAuthenticator.js)
//     and its blob service handler use only for a request with a bearer token.
// Each is put in require's cache as a stand-in that loads it at its first use (lazy.js). Nothing
// else changes: with telemetry on, the first `appInsights.setup(...)` loads the SDK as before;
// with AZURITE_DB set, the SQL blob server is loaded when the factory builds it; the first copy
// from a URL loads axios. What a stand-in answers for `__esModule` without loading (what tslib's
// `__importDefault` reads when the requiring module loads) is the real module's, declared below.
// packages/funcstack/tests/test_azurite_preload.py holds both halves for each (nothing loaded
// until used; the real module once used, with the `__esModule` declared here) and names what
// moved if Azurite stops requiring one of them.
"use strict";

const path = require("path");
const { standIn } = require("./lazy");

// Each module's request (resolved as below) and its real `__esModule` (true, or undefined).
const LAZY = [
  { request: "applicationinsights", esModule: true },
  { request: "./blob/SqlBlobServer", esModule: true },
  { request: "axios", esModule: undefined },
  { request: "jsonwebtoken", esModule: undefined },
];
// Resolved as Azurite's own require resolves it: from the folder of its main script.
const from = process.argv[1] ? path.dirname(process.argv[1]) : process.cwd();

for (const { request, esModule } of LAZY) {
  let file;
  try {
    file = require.resolve(request, { paths: [from] });
  } catch {
    continue; // not installed beside Azurite: nothing to stand in for
  }
  standIn(file, { esModule });
}

module.exports = { LAZY };
