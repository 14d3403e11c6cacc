// Loaded before a Node stand-in started at its first connection (`node --require <this> ...`;
// funcstack/_activation.py): the ports were bound and are listening in funcstack's process,
// which hands the sockets to this one (FUNCSTACK_LISTEN_FDS: "<port>:<fd>,..."). A server told
// to listen on one of those ports listens on its socket instead, and accepts the connections
// already waiting there. Any other listen is left as it is.
"use strict";

const net = require("net");

const fds = new Map();
for (const pair of (process.env.FUNCSTACK_LISTEN_FDS || "").split(",").filter(Boolean)) {
  const [port, fd] = pair.split(":").map(Number);
  fds.set(port, fd);
}
delete process.env.FUNCSTACK_LISTEN_FDS; // not inherited by what the server starts

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  const port = Number(first !== null && typeof first === "object" ? first.port : first);
  const fd = fds.get(port);
  if (fd === undefined) {
    return listen.apply(this, args);
  }
  fds.delete(port);
  const callback = args.find((arg) => typeof arg === "function");
  return callback === undefined ? listen.call(this, { fd }) : listen.call(this, { fd }, callback);
};
