"use strict";
/*
 * A module of an npm package loaded at its first use instead of when it is required, for
 * funcstack's Node.js stand-ins: what Azurite requires at load and a start as funcstack's does
 * not use (azurite_preload.js), what the Cosmos DB endpoint's query engine requires at load and
 * a query thread or a query without a spatial function does not use (cosmos/sqlparser.js).
 *
 * `standIn(file, {esModule, functions})` puts a stand-in into require's cache (Node's public
 * `require.cache`) under the module's resolved file: a `require` of it gets an object that loads
 * the real module at its first use and hands on every property from it. Reading it without
 * using it loads nothing:
 *   - `__esModule` is answered as declared (the real module's: true, or undefined), what
 *     TypeScript's and tslib's import helpers read when the requiring module loads;
 *   - each name of `functions` is a function that calls the real module's (loading it then),
 *     for a requiring module that takes the function itself when it loads; the real module,
 *     once loaded, is checked to have each as a function.
 */

const Module = require("module");

/** Stand in for `file` until its first use; false (nothing done) when it is loaded already. */
function standIn(file, { esModule, functions = [] } = {}) {
  if (require.cache[file] !== undefined) return false;
  let real = null;
  const load = () => {
    if (real === null) {
      delete require.cache[file];
      real = require(file); // eslint-disable-line global-require, import/no-dynamic-require
      for (const name of functions) {
        if (typeof real[name] !== "function") {
          throw new Error(`funcstack stood in for ${file}'s ${name} as a function; it is not one`);
        }
      }
    }
    return real;
  };
  const forwarding = new Map(functions.map(name => [name, function forward(...args) {
    return load()[name].apply(this, args);
  }]));
  const module_ = new Module(file, module);
  module_.filename = file;
  module_.loaded = true;
  module_.exports = new Proxy(
    {},
    {
      get: (_, key) => {
        if (key === "__esModule") return esModule;
        return forwarding.has(key) ? forwarding.get(key) : load()[key];
      },
      has: (_, key) => key in load(),
      ownKeys: () => Reflect.ownKeys(load()),
      getOwnPropertyDescriptor: (_, key) => {
        const d = Reflect.getOwnPropertyDescriptor(load(), key);
        return d === undefined ? undefined : { ...d, configurable: true };
      },
    },
  );
  require.cache[file] = module_;
  return true;
}

module.exports = { standIn };
