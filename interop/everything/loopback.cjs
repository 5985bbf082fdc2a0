// Preloaded into server-everything (node -r ./loopback.cjs ...) so that its
// Streamable HTTP server listens on 127.0.0.1 only: it calls
// app.listen(PORT), which would bind every interface.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  const plainPort = typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port));
  if (plainPort && (args.length === 1 || typeof args[1] === "function")) {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
