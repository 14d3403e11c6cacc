// Loaded before every Node stand-in funcstack starts (`node --require <this> ...`: the Cosmos DB
// endpoint, Azurite). FUNCSTACK_OWNER_PID names the process that started it
// (funcstack/_processes.py, OWNER_ENV): once that process is no longer this one's parent (it
// ended, however: a SIGKILL too), this one stops as at SIGTERM, its state flushed by its own
// handler. Looked at every second on a timer that keeps nothing alive.
"use strict";

const owner = Number(process.env.FUNCSTACK_OWNER_PID);
delete process.env.FUNCSTACK_OWNER_PID; // not inherited by what the server starts

if (Number.isInteger(owner) && owner > 0) {
  const timer = setInterval(() => {
    if (process.ppid !== owner) {
      clearInterval(timer);
      process.kill(process.pid, "SIGTERM");
    }
  }, 1000);
  timer.unref();
}
