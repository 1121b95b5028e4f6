// Preloaded with `node --require <this file>` by the interop tests: servers
// that call `listen(port)` without a host (server-everything does) would
// listen on every interface; this makes them listen on 127.0.0.1 only.
"use strict";
const net = require("net");
const original = net.Server.prototype.listen;
const LOOPBACK = "127.0.0.1";

function isPort(v) {
  return typeof v === "number" || (typeof v === "string" && /^\d+$/.test(v));
}

net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (args.length === 0 || typeof first === "function") {
    // listen() / listen(cb): a random port on every interface.
    args.unshift(0, LOOPBACK);
  } else if (isPort(first)) {
    if (typeof args[1] !== "string") args.splice(1, 0, LOOPBACK);
  } else if (
    first !== null &&
    typeof first === "object" &&
    first.path === undefined &&
    first.fd === undefined &&
    first._handle === undefined &&
    first.handle === undefined &&
    first.host === undefined
  ) {
    args[0] = Object.assign({}, first, { host: LOOPBACK });
  }
  return original.apply(this, args);
};
